"""Audit of admin actions: who did what to which target, when, with what result, committed in batches.

Every mutating route calls, once it knows the outcome::

    from api.services import audit
    audit.record(ctx, tenant, principal, "connector.create", name, audit.DONE)

The row lands in the tenant's Delta ``audit`` table (appended with delta-rs, see ``control.audit``): with the API's
batcher (``api.services.auditbatch``) within ``api.audit_flush_s`` in one commit with the other rows of that table,
without one (the CLI) before ``record`` returns. There
``GET /v1/tenants/{tenant}/audit`` and Trino (``lake.<schema>.audit``) read it. The target is stored as its sha256
only: an erased URN must never be written down in clear, and one rule for every action keeps it so. The rows about
an erased URN hold its keyed hash (``control.erased``), which guessed URNs cannot be tested against. Whoever knows a
target finds its rows by hashing it (the audit route takes ``?target=`` and tries both hashes). Tenant lifecycle actions
(create, update, suspend, resume, delete) also go to the platform's audit table, which outlives a deleted tenant,
as do the changes to platform-admin clients and signing keys.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from api.context import ApiContext
from api.settings import AdminApiSettings
from control import audit as control_audit
from control.audit import ACTION_PATTERN, AuditRow
from control.auth.principal import Principal
from control.erased import urn_hasher
from metalake.lake_uri import LakeRoot
from metalake.s3 import lake_storage_options
from tenants.naming import CONTROL_DATABASE, platform_audit_dir

log = logging.getLogger(__name__)

# Results, as ``metalake lake erase`` writes them too.
DONE = "done"
ACCEPTED = "accepted"
FAILED = "failed"
REFUSED = "refused"


def target_hash(target: str) -> str:
    """The sha256 the audit stores for a target; an erased URN's rows hold its keyed hash instead (``hashed``)."""
    return control_audit.target_hash(target)


def target_hashes(settings: AdminApiSettings, target: str) -> tuple[str, ...]:
    """Every hash a row about ``target`` may hold: the sha256 of most rows, and the keyed hash (under each configured
    key) the rows about an erased URN hold (``control.erased``)."""
    return tuple(sorted(urn_hasher(settings).candidates(target)))


def tenant_audit_path(ctx: ApiContext, tenant: str) -> LakeRoot:
    """The tenant's ``audit`` table, under its own lake root if the registry gives it one."""
    return control_audit.tenant_audit_path(ctx.mongo[CONTROL_DATABASE], ctx.settings.lake_root, tenant)


def _row(
    principal: Principal, action: str, target: str, result: str, counts: Mapping[str, int] | None, hashed: str | None
) -> AuditRow:
    if not ACTION_PATTERN.fullmatch(action):
        raise ValueError(f"audit action {action!r}: lowercase words separated by '.'")
    digest = hashed if hashed is not None else target_hash(target)
    return AuditRow(datetime.now(UTC), principal.subject, action, digest, result, dict(counts or {}))


def record(  # noqa: PLR0913
    ctx: ApiContext,
    tenant: str,
    principal: Principal,
    action: str,
    target: str,
    result: str,
    *,
    counts: Mapping[str, int] | None = None,
    hashed: str | None = None,
) -> None:
    """Append one row to the tenant's audit table: committed before this returns without a batcher (the CLI), within
    ``api.audit_flush_s`` with one. ``hashed``: the target's hash as the caller computed it (an erased URN's keyed
    hash), stored instead of its sha256."""
    _write(ctx, tenant_audit_path(ctx, tenant), _row(principal, action, target, result, counts, hashed))
    log.info("api.audit", extra={"tenant": tenant, "action": action, "result": result})


def record_platform(
    ctx: ApiContext,
    principal: Principal,
    action: str,
    target: str,
    result: str,
    *,
    counts: Mapping[str, int] | None = None,
) -> None:
    """Append one row to the platform's audit table (tenant lifecycle, platform-admin clients, signing keys)."""
    _write(ctx, platform_audit_dir(ctx.settings.lake_root), _row(principal, action, target, result, counts, None))
    log.info("api.audit_platform", extra={"action": action, "result": result})


def _write(ctx: ApiContext, path: LakeRoot, row: AuditRow) -> None:
    batcher = ctx.audit_batcher
    if batcher is None or not batcher.add(path, row):
        control_audit.append(path, [row], lake_storage_options(ctx.settings))


def flush(ctx: ApiContext, path: LakeRoot | None = None) -> None:
    """Commit the rows still buffered (for the table at ``path`` only, if given): before reading the audit, or
    before a tenant's folder goes."""
    if ctx.audit_batcher is not None:
        ctx.audit_batcher.flush(path)
