"""Reading dbt's artifacts from the tenant's folder: path confinement, size limit, schema versions."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

from control.connectors.plugin import SourceAccess
from control.connectors.reasons import SourceFailure

log = logging.getLogger(__name__)

# Versions whose node shape this connector reads (dbt 1.6 wrote manifest v10, 1.7 v11, 1.8 and later v12).
MANIFEST_VERSIONS = frozenset({"v10", "v11", "v12"})
CATALOG_VERSIONS = frozenset({"v1"})


class ArtifactError(SourceFailure):
    """An artifact could not be read: an error class and a message of ours (shown in the connector's status)."""


def resolve(relative: str, tenant: str, access: SourceAccess) -> Path:
    """The real path of ``relative`` inside one of the tenant's folders (``<root>/<tenant>/``), symbolic links
    resolved first, so no link or ``..`` leads out of it; refused when no root is configured or it is outside."""
    for root in access.artifact_roots:
        base = (Path(root) / tenant).resolve()
        candidate = (base / relative).resolve()
        if candidate.is_relative_to(base) and candidate.is_file():
            return candidate
    if not access.artifact_roots:
        raise ArtifactError("path-refused", "this worker reads no local artifacts (connect.artifact_roots is empty)")
    raise ArtifactError("not-found", f"no file {relative!r} in the tenant's artifact folder")


def load(relative: str, tenant: str, access: SourceAccess, kind: str, max_bytes: int) -> dict[str, Any]:
    """One artifact (``manifest`` or ``catalog``) as a dict, its ``dbt_schema_version`` checked."""
    path = resolve(relative, tenant, access)
    size = os.stat(path).st_size
    if size > max_bytes:
        raise ArtifactError("too-large", f"{kind} is {size} bytes, above the connector's max_artifact_bytes")
    try:
        with path.open("rb") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        log.warning("dbt.artifact_unreadable", extra={"kind": kind, "error": type(exc).__name__})
        raise ArtifactError("invalid-artifact", f"{kind} is not readable JSON") from None
    check_version(data, kind)
    return data if isinstance(data, dict) else {}


def check_version(data: Any, kind: str) -> str:
    """The artifact's schema version (``v12``); an unknown one is refused rather than half read."""
    url = data.get("metadata", {}).get("dbt_schema_version", "") if isinstance(data, dict) else ""
    version = str(url).rsplit("/", 1)[-1].removesuffix(".json")
    allowed = MANIFEST_VERSIONS if kind == "manifest" else CATALOG_VERSIONS
    if not str(url).startswith("https://schemas.getdbt.com/dbt/" + kind + "/") or version not in allowed:
        raise ArtifactError(
            "unsupported-version", f"{kind} schema {version or 'unknown'!r} is not one of {sorted(allowed)}"
        )
    return version
