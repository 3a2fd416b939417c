"""Reading dbt's artifacts from the tenant's folder or from S3-compatible object storage: path confinement, the
SSRF guard, size limits, schema versions."""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import SecretStr

from connectors.dbt.config import DbtConfig, s3_location
from connectors.dbt.s3_objects import S3ObjectError, get_object
from control.connectors.plugin import SourceAccess
from control.connectors.reasons import SourceFailure
from metalake.s3 import S3Client

log = logging.getLogger(__name__)

# Versions whose node shape this connector reads (dbt 1.6 wrote manifest v10, 1.7 v11, 1.8 and later v12).
MANIFEST_VERSIONS = frozenset({"v10", "v11", "v12"})
CATALOG_VERSIONS = frozenset({"v1"})
# The child that parses an artifact (connectors/dbt/parse_child.py) and its bounds. dbt's own nesting is a handful of
# levels (node -> config -> meta -> a tenant's values). dbt's JSON spends 15 to 30 bytes per value (keys, ids, SQL):
# one value per 8 bytes of artifact is ample, while `[{},{},...]` (3 bytes, ~70 bytes each once parsed) is refused;
# and never more than MAX_ELEMENTS, so what the worker parses of the child's answer stays a few hundred MiB at most.
_CHILD = str(Path(__file__).with_name("parse_child.py"))
MAX_DEPTH = 64
MAX_ELEMENTS = 3_000_000
_ELEMENTS_FLOOR = 100_000
_BYTES_PER_ELEMENT = 8
PARSE_TIMEOUT_S = 300.0
DEFAULT_PARSE_MEMORY = 1024 * 1024 * 1024


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


def limit(config: DbtConfig, access: SourceAccess) -> tuple[int, str]:
    """The size limit of one artifact and the setting that sets it: the connector's ``max_artifact_bytes``, or the
    worker's cap (``connect.artifact_max_bytes``) where that is lower."""
    if access.max_artifact_bytes < config.max_artifact_bytes:
        return access.max_artifact_bytes, "the worker's connect.artifact_max_bytes"
    return config.max_artifact_bytes, "config/max_artifact_bytes"


@dataclass(frozen=True)
class Raw:
    """An artifact's bytes (None: the object still has the ETag asked about) and its ETag ("" for a local file)."""

    body: bytes | None
    etag: str = ""


def load(location: str, tenant: str, access: SourceAccess, kind: str, config: DbtConfig) -> dict[str, Any]:
    """One artifact (``manifest`` or ``catalog``) as a dict, its ``dbt_schema_version`` checked: a path in the
    tenant's folder, or an ``s3://`` object."""
    return parse(read(location, tenant, access, kind, config).body or b"", kind, access.parse_memory_bytes)


def read(
    location: str, tenant: str, access: SourceAccess, kind: str, config: DbtConfig, if_none_match: str | None = None
) -> Raw:
    """The artifact's bytes, within the size limit; an ``s3://`` object asked with ``if_none_match`` comes back
    without a body if it is unchanged."""
    max_bytes, limit_name = limit(config, access)
    s3 = s3_location(location)
    if s3 is not None:
        return fetch(config, s3[0], s3[1], access, kind, max_bytes, limit_name, if_none_match)
    path = resolve(location, tenant, access)
    size = os.stat(path).st_size
    if size > max_bytes:
        raise ArtifactError("too-large", f"{kind} is {size} bytes, above {limit_name} ({max_bytes})")
    try:
        return Raw(path.read_bytes())
    except OSError as exc:
        log.warning("dbt.artifact_unreadable", extra={"kind": kind, "error": type(exc).__name__})
        raise ArtifactError("invalid-artifact", f"{kind} is not readable JSON") from None


def parse(raw: bytes, kind: str, memory: int = DEFAULT_PARSE_MEMORY) -> dict[str, Any]:
    """The parts of one artifact the mapping reads, parsed in a child process under ``memory`` bytes of address space
    (:mod:`connectors.dbt.parse_child`), its depth and element count bounded, its schema version checked."""
    elements = min(MAX_ELEMENTS, _ELEMENTS_FLOOR + len(raw) // _BYTES_PER_ELEMENT)
    argv = [sys.executable, "-I", "-S", _CHILD, kind, str(memory), str(MAX_DEPTH), str(elements)]
    try:
        done = subprocess.run(argv, input=raw, capture_output=True, timeout=PARSE_TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired:
        log.warning("dbt.artifact_unparsed", extra={"kind": kind, "error": "timeout"})
        raise ArtifactError("timeout", f"{kind} was not parsed within {PARSE_TIMEOUT_S} s") from None
    if done.returncode == 0:
        # Bounded by the child (depth, elements, only the needed sections): safe and small enough to parse here.
        data = json.loads(done.stdout)
        check_version(data, kind)
        return data if isinstance(data, dict) else {}
    error, detail = _child_error(done, memory)
    log.warning("dbt.artifact_unparsed", extra={"kind": kind, "error": error, "status": done.returncode})
    if error == "too-large":
        raise ArtifactError(
            "too-large", f"{kind} {detail} (the worker's connect.artifact_parse_memory_bytes: {memory})"
        )
    raise ArtifactError("invalid-artifact", f"{kind} {detail}")


def _child_error(done: subprocess.CompletedProcess[bytes], memory: int) -> tuple[str, str]:
    """The child's error class and words; a child that died without saying ran out of memory (or was killed)."""
    if done.returncode == 2:
        try:
            said = json.loads(done.stdout)
            return str(said["error"]), str(said["detail"])
        except (ValueError, KeyError, TypeError):
            pass
    return "too-large", f"needs more than {memory} bytes of memory to parse (the parser stopped: {done.returncode})"


def s3_client(config: DbtConfig) -> S3Client:
    """The signing client of the connector's key pair (the configuration requires it for an ``s3://`` artifact)."""
    endpoint = config.s3_endpoint or f"https://s3.{config.s3_region}.amazonaws.com"
    key_id = config.s3_access_key_id or SecretStr("")
    secret = config.s3_secret_access_key or SecretStr("")
    return S3Client(endpoint, config.s3_region, key_id, secret, config.s3_path_style, config.s3_timeout_s)


def fetch(  # noqa: PLR0913
    config: DbtConfig,
    bucket: str,
    key: str,
    access: SourceAccess,
    kind: str,
    max_bytes: int,
    limit_name: str,
    if_none_match: str | None = None,
) -> Raw:
    """The object's bytes, through the SSRF guard, streamed up to ``max_bytes``; failures as :class:`ArtifactError`
    that name the object and the configuration field at fault, never a credential."""
    client = s3_client(config)
    fields = {"kind": kind, "bucket": bucket, "key": key, "endpoint": client.endpoint}
    started = time.monotonic()
    try:
        obj = get_object(
            client, bucket, key, guard=access.guard, max_bytes=max_bytes, if_none_match=if_none_match,
            deadline_s=config.s3_download_deadline_s,
        )  # fmt: skip
    except S3ObjectError as exc:
        # The operator log has S3's status and code; the tenant's message says which field to fix.
        log.warning("dbt.s3_failed", extra={**fields, "error_class": exc.kind, "status": exc.status, "code": exc.code})
        raise ArtifactError(exc.kind, _message(exc, kind, bucket, key, max_bytes, limit_name)) from None
    log.info(
        "dbt.s3_read",
        extra={
            **fields, "bytes": None if obj.body is None else len(obj.body), "unchanged": obj.body is None,
            "etag": obj.etag, "elapsed_s": round(time.monotonic() - started, 3),
        },
    )  # fmt: skip
    return Raw(obj.body, obj.etag)


def _message(exc: S3ObjectError, kind: str, bucket: str, key: str, max_bytes: int, limit_name: str) -> str:
    where = f"s3://{bucket}/{key} ({kind})"
    if exc.kind == "not-found":
        what = {"NoSuchBucket": f"no bucket {bucket!r}", "NoSuchKey": f"no key {key!r} in bucket {bucket!r}"}
        return f"{where}: {what.get(exc.code, 'no such bucket or key')} (config/{kind})"
    if exc.kind == "access-denied":
        return (
            f"{where}: access denied (HTTP {exc.status}{' ' + exc.code if exc.code else ''}): check "
            f"config/s3_access_key_id and config/s3_secret_access_key, and that the key may read the object"
        )
    if exc.kind == "too-large":
        return f"{where} is larger than {limit_name} ({max_bytes} bytes)"
    if exc.kind == "address-refused":
        return "the host of config/s3_endpoint resolves to an address connectors may not reach"
    if exc.kind == "timeout":
        return f"{where}: not downloaded within config/s3_download_deadline_s"
    if exc.kind == "unreachable":
        return "the S3 endpoint (config/s3_endpoint) did not answer"
    return f"{exc} (config/s3_endpoint, config/s3_region, config/s3_path_style)"


def check_version(data: Any, kind: str) -> str:  # noqa: ANN401
    """The artifact's schema version (``v12``); an unknown one is refused rather than half read."""
    url = data.get("metadata", {}).get("dbt_schema_version", "") if isinstance(data, dict) else ""
    version = str(url).rsplit("/", 1)[-1].removesuffix(".json")
    allowed = MANIFEST_VERSIONS if kind == "manifest" else CATALOG_VERSIONS
    if not str(url).startswith("https://schemas.getdbt.com/dbt/" + kind + "/") or version not in allowed:
        raise ArtifactError(
            "unsupported-version", f"{kind} schema {version or 'unknown'!r} is not one of {sorted(allowed)}"
        )
    return version
