"""Reading the audit trail: a tenant's (``/v1/tenants/{tenant}/audit``) and the platform's (``/v1/audit``: tenant
lifecycle, which outlives deleted tenants). Newest first, cursor paging, filters by action and time, and by target:
the target given is hashed here, as it is when rows are written, so clear values never reach the table."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query

from api.context import ApiContext, ContextDep
from api.deps import PlatformAdmin, TenantAdmin
from api.paging import CursorParam, Limit, decode_cursor, encode_cursor
from api.problems import Problem, problem_doc
from api.routes.tenants import ERRORS
from api.schemas.audit import AuditEntry, AuditPage
from api.services import audit
from api.workpool import AUDIT
from control.audit import ACTION_PATTERN, AuditQuery, AuditRow, StorageOptions, read
from metalake.lake_uri import LakeRoot
from metalake.s3 import lake_storage_options
from tenants.naming import platform_audit_dir

router = APIRouter(tags=["audit"])


READ_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    400: problem_doc("the cursor is not one of this listing", "invalid-cursor", 400),
    422: problem_doc("invalid filter (the parameter is named)", "invalid-request", 422),
}

ActionFilter = Annotated[
    str | None,
    Query(
        max_length=100,
        description="Only this action (e.g. `tenant.suspend`); ending in '.' selects a family (`erasure.`).",
    ),
]
TargetFilter = Annotated[
    str | None, Query(max_length=2000, description="Only rows about this target (hashed before the lookup).")
]
Since = Annotated[datetime | None, Query(description="Only rows at or after this time (ISO 8601 with zone).")]
Until = Annotated[datetime | None, Query(description="Only rows before this time (ISO 8601 with zone).")]


def _query(  # noqa: PLR0913
    ctx: ContextDep,
    limit: Limit = 50,
    cursor: CursorParam = None,
    action: ActionFilter = None,
    target: TargetFilter = None,
    since: Since = None,
    until: Until = None,
) -> AuditQuery:
    """The listing's query parameters (both trails take the same), checked: a dependency of both routes."""
    if action is not None and not ACTION_PATTERN.fullmatch(action):
        raise Problem(422, "invalid-request", "action: lowercase words separated by '.'", field="action")
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise Problem(422, "invalid-request", f"{name}: needs a time zone (e.g. Z)", field=name)
    before = None
    key = decode_cursor("audit", cursor, 3)
    if key is not None:
        try:
            before = (datetime.fromisoformat(key[0]), key[1], key[2])
        except ValueError:
            raise Problem(400, "invalid-cursor", "cursor: not a cursor of this listing", field="cursor") from None
    return AuditQuery(
        action=action,
        target_hashes=audit.target_hashes(ctx.settings, target) if target is not None else (),
        since=since,
        until=until,
        before=before,
        limit=limit + 1,
    )


Filters = Annotated[AuditQuery, Depends(_query)]


def _page(path: LakeRoot, query: AuditQuery, storage: StorageOptions) -> AuditPage:
    try:
        rows: list[AuditRow] = read(path, query, storage)
    except ValueError:
        raise Problem(400, "invalid-cursor", "cursor: not a cursor of this listing", field="cursor") from None
    limit = query.limit - 1
    page = rows[:limit]
    last = page[-1] if page else None
    return AuditPage(
        items=[
            AuditEntry(
                at=r.at,
                actor=r.actor,
                action=r.action,
                target_hash=r.target_hash,
                result=r.result,
                counts=dict(r.counts),
            )
            for r in page
        ],
        next_cursor=(
            encode_cursor("audit", [last.at.isoformat(), last.action, last.target_hash])
            if last is not None and len(rows) > limit
            else None
        ),
    )


def _tenant_page(ctx: ApiContext, tenant: str, query: AuditQuery) -> AuditPage:
    path = audit.tenant_audit_path(ctx, tenant)
    audit.flush(ctx, path)  # the rows still buffered are read too
    return _page(path, query, lake_storage_options(ctx.settings))


def _platform_page(ctx: ApiContext, query: AuditQuery) -> AuditPage:
    path = platform_audit_dir(ctx.settings.lake_root)
    audit.flush(ctx, path)
    return _page(path, query, lake_storage_options(ctx.settings))


# Whose share of the audit pool the platform trail's reads take (no tenant id has a leading underscore).
PLATFORM = "_platform"


@router.get(
    "/v1/tenants/{tenant}/audit",
    summary="The tenant's audit trail: who did what, when, with what result (newest first)",
    response_model=AuditPage,
    responses={**READ_ERRORS, 403: problem_doc("the token lacks tenant:admin", "insufficient-scope", 403)},
)
async def tenant_audit(
    tc: TenantAdmin,
    ctx: ContextDep,
    query: Filters,
) -> AuditPage:
    # delta-rs reads: on the audit's own pool, within the tenant's share of it (429/503 at once beyond).
    return await ctx.pools.run(AUDIT, tc.tenant, _tenant_page, ctx, tc.tenant, query)


@router.get(
    "/v1/audit",
    summary="The platform's audit trail: tenant lifecycle, platform-admin clients, signing keys (newest first)",
    response_model=AuditPage,
    responses=READ_ERRORS,
)
async def platform_audit(
    principal: PlatformAdmin,
    ctx: ContextDep,
    query: Filters,
) -> AuditPage:
    return await ctx.pools.run(AUDIT, PLATFORM, _platform_page, ctx, query)
