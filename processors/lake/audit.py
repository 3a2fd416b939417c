"""The tenant's ``audit`` table from the lake commands: created with the tenant's tables, appended by an erase.

Schema, reads and appends are ``control.audit``'s (delta-rs): one definition for the API and the lake commands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from control import audit
from metalake.s3 import lake_storage_options
from processors.lake.settings import LakeWorkerSettings
from tenants.lake_catalog import register_tables
from tenants.naming import TenantNames

log = logging.getLogger(__name__)


def ensure_audit_table(settings: LakeWorkerSettings, names: TenantNames) -> None:
    """Create the table if missing and register it in Trino (best effort: Trino down must not block an erase)."""
    audit.ensure_table(names.table("audit").path, lake_storage_options(settings))
    try:
        register_tables(settings, names, ("audit",))
    except Exception as exc:  # noqa: BLE001 - the audit row matters, the Trino view of it can come later
        log.warning("lake.audit_register_failed", extra={"error": type(exc).__name__})


def record(  # noqa: PLR0913
    settings: LakeWorkerSettings,
    names: TenantNames,
    actor: str,
    action: str,
    target_hash: str,
    result: str,
    counts: Mapping[str, int],
) -> None:
    """Append one audit row (``control.audit.append`` checks that ``counts`` holds numbers only)."""
    row = audit.AuditRow(datetime.now(UTC), actor, action, target_hash, result, counts)
    audit.append(names.table("audit").path, [row], lake_storage_options(settings))
