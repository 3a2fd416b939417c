"""Tenants: create (and provision), read, list, update, suspend, resume, delete (and deprovision). Platform admins.

The API runs no provisioning step: create, ``POST .../provision`` and delete queue the work
(``control.provisioning.queue``) and answer 202 with the tenant as it is; the lake worker runs the steps (a pooled
tenant in seconds, a dedicated one's Delta tables with Spark in tens of seconds, a deletion a minute or more). Poll
``GET /v1/tenants/{tenant}`` (the ``Location`` of the answer) until ``state`` is ``active`` (or the tenant is gone);
``provisioning`` shows the steps done and pending, ``error`` a failed step. See docs/tenants.md.
"""

from __future__ import annotations

import logging
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.concurrency import run_in_threadpool

from api.auth.deps import require_tenant
from api.context import ApiContext, ContextDep
from api.deps import PlatformAdmin, TenantReader
from api.paging import CursorParam, Limit, decode_cursor, encode_cursor
from api.problems import Problem, problem_doc
from api.schemas.tenants import Provisioning, TenantCreate, TenantPage, TenantUpdate, TenantView
from api.security import TenantContext
from api.services import audit
from control.auth.principal import Scope
from control.provisioning.provisioner import pending
from metalake.tenancy import RESERVED_TENANT_IDS
from tenants.access.sync import AccessSync
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantExists, TenantRecord, TenantRegistry, TenantState
from tenants.trino_schemas import trino_schema

log = logging.getLogger(__name__)

router = APIRouter(prefix="/v1/tenants", tags=["tenants"])

TenantAdminOfPlatform = Annotated[TenantContext, Depends(require_tenant(Scope.PLATFORM_ADMIN))]


ERRORS: dict[int | str, dict[str, Any]] = {
    401: problem_doc("missing or invalid access token", "invalid-token", 401),
    403: problem_doc("the token lacks platform:admin", "insufficient-scope", 403),
    429: problem_doc("rate limit exceeded", "rate-limited", 429),
}
NOT_FOUND: dict[int | str, dict[str, Any]] = {404: problem_doc("no such tenant", "tenant-not-found", 404)}


def _registry(ctx: ApiContext) -> TenantRegistry:
    return TenantRegistry(ctx.mongo[CONTROL_DATABASE])


def _view(ctx: ApiContext, record: TenantRecord) -> TenantView:
    return TenantView(
        id=record.id,
        tier=record.tier,
        state=record.state,
        display_name=record.display_name,
        settings=dict(record.settings),
        created_at=record.created_at,
        updated_at=record.updated_at,
        provisioning=Provisioning(done=sorted(record.steps), pending=pending(record)),
        trino_schema=trino_schema(ctx.settings, record.id),
        error=record.error,
        queued_at=record.queued_at,
    )


def _get(ctx: ApiContext, tenant: str) -> TenantRecord:
    record = _registry(ctx).get(tenant)
    if record is None:
        raise Problem(404, "tenant-not-found", "no such tenant", field="tenant")
    return record


def _forget(request: Request, tenant: str) -> None:
    """Drop the auth runtime's cached view of the tenant, so a suspension bites at once in this process."""
    auth = getattr(request.app.state, "auth", None)
    tenants = getattr(auth, "tenants", None)
    if tenants is not None:
        tenants.invalidate(tenant)


def render_access(ctx: ApiContext, tenant: str) -> None:
    """Rewrite Trino's rules now: a suspended (or deleting) tenant has no Trino users (``AccessSync.tenants``), so its
    tokens and tools are refused within Trino's reload (1 s) instead of at the access runner's next resync; a resumed
    one gets them back. A failure is logged, not raised: the state has changed, and the next resync renders it."""
    try:
        AccessSync(ctx.settings, ctx.mongo).render()
    except Exception as exc:  # noqa: BLE001 - Trino or MongoDB unreachable: the resync catches up
        log.warning("access.render_failed", extra={"tenant": tenant, "error": type(exc).__name__})


@router.post(
    "",
    status_code=202,
    summary="Create a tenant; the lake worker provisions it after the answer (poll Location until state is active)",
    response_model=TenantView,
    responses={
        **ERRORS,
        409: problem_doc("a tenant with this id exists", "tenant-exists", 409),
        422: problem_doc("invalid body (the field is named)", "invalid-request", 422),
    },
)
async def create_tenant(
    body: TenantCreate,
    principal: PlatformAdmin,
    ctx: ContextDep,
    response: Response,
) -> TenantView:
    if body.id in RESERVED_TENANT_IDS:
        raise Problem(422, "invalid-request", "id: reserved for the platform", field="id")
    registry = _registry(ctx)
    try:
        record = await run_in_threadpool(
            registry.create, body.id, body.tier, display_name=body.display_name, settings=body.settings
        )
    except TenantExists:
        await run_in_threadpool(audit.record_platform, ctx, principal, "tenant.create", body.id, audit.REFUSED)
        raise Problem(409, "tenant-exists", "a tenant with this id exists", field="id") from None
    # Created queued (queued_at): the lake worker picks it up within provisioning.poll_s.
    await run_in_threadpool(audit.record_platform, ctx, principal, "tenant.create", body.id, audit.ACCEPTED)
    response.headers["Location"] = f"/v1/tenants/{body.id}"
    return _view(ctx, record)


@router.get("", summary="List tenants (id order)", response_model=TenantPage, responses=ERRORS)
async def list_tenants(
    principal: PlatformAdmin,
    ctx: ContextDep,
    limit: Limit = 50,
    cursor: CursorParam = None,
    state: Annotated[TenantState | None, Query(description="Only tenants in this state.")] = None,
) -> TenantPage:
    after = decode_cursor("tenants", cursor, 1)
    registry = _registry(ctx)
    # A state filter is applied to pages of the id order, so a page may be short; the cursor still moves on.
    records = await run_in_threadpool(registry.list, after=after[0] if after else None, limit=limit + 1)
    page = records[:limit]
    more = len(records) > limit
    return TenantPage(
        items=[_view(ctx, r) for r in page if state is None or r.state is state],
        next_cursor=encode_cursor("tenants", [page[-1].id]) if more else None,
    )


@router.get(
    "/{tenant}",
    summary="Get a tenant (its state and provisioning progress)",
    response_model=TenantView,
    responses={**ERRORS, **NOT_FOUND},
)
async def get_tenant(tc: TenantReader, ctx: ContextDep) -> TenantView:
    return _view(ctx, await run_in_threadpool(_get, ctx, tc.tenant))


@router.patch(
    "/{tenant}",
    summary="Update a tenant's display name or settings",
    response_model=TenantView,
    responses={
        **ERRORS,
        **NOT_FOUND,
        409: problem_doc("the tier cannot change, or the tenant is being deleted", "tier-change-unsupported", 409),
        422: problem_doc("invalid body (the field is named)", "invalid-request", 422),
    },
)
async def update_tenant(body: TenantUpdate, tc: TenantAdminOfPlatform, ctx: ContextDep) -> TenantView:
    current = await run_in_threadpool(_get, ctx, tc.tenant)
    if body.tier is not None and body.tier is not current.tier:
        await run_in_threadpool(audit.record, ctx, tc.tenant, tc.principal, "tenant.update", tc.tenant, audit.REFUSED)
        raise Problem(
            409,
            "tier-change-unsupported",
            "tier: a tenant's tier cannot change in place (its events, topics and streaming checkpoints would have to "
            "move while it runs); create a new tenant with the other tier and migrate",
            field="tier",
        )
    if current.state is TenantState.DELETING:
        raise Problem(409, "tenant-deleting", "the tenant is being deleted", field="tenant")
    record = await run_in_threadpool(
        _registry(ctx).update, tc.tenant, display_name=body.display_name, settings=body.settings
    )
    if record is None:
        raise Problem(404, "tenant-not-found", "no such tenant", field="tenant")
    await run_in_threadpool(audit.record, ctx, tc.tenant, tc.principal, "tenant.update", tc.tenant, audit.DONE)
    await run_in_threadpool(audit.record_platform, ctx, tc.principal, "tenant.update", tc.tenant, audit.DONE)
    return _view(ctx, record)


async def _transition(
    request: Request,
    tc: TenantContext,
    ctx: ApiContext,
    action: Literal["suspend", "resume"],
) -> TenantView:
    target, expected = (
        (TenantState.SUSPENDED, [TenantState.ACTIVE, TenantState.SUSPENDED])
        if action == "suspend"
        else (TenantState.ACTIVE, [TenantState.SUSPENDED, TenantState.ACTIVE])
    )
    current = await run_in_threadpool(_get, ctx, tc.tenant)
    record = await run_in_threadpool(_registry(ctx).set_state, tc.tenant, target, expected=expected)
    name = f"tenant.{action}"
    if record is None:
        await run_in_threadpool(audit.record, ctx, tc.tenant, tc.principal, name, tc.tenant, audit.REFUSED)
        raise Problem(
            409,
            "invalid-state",
            f"state: a tenant that is {current.state.value} cannot {action}",
            field="state",
            extra={"state": current.state.value},
        )
    _forget(request, tc.tenant)
    await run_in_threadpool(render_access, ctx, tc.tenant)
    await run_in_threadpool(audit.record, ctx, tc.tenant, tc.principal, name, tc.tenant, audit.DONE)
    await run_in_threadpool(audit.record_platform, ctx, tc.principal, name, tc.tenant, audit.DONE)
    return _view(ctx, record)


STATE_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    **NOT_FOUND,
    409: problem_doc("the tenant is not in a state that allows this", "invalid-state", 409),
}


@router.post(
    "/{tenant}/suspend",
    summary="Suspend an active tenant: its tokens, its events and its Trino users are refused until it is resumed",
    response_model=TenantView,
    responses=STATE_ERRORS,
)
async def suspend_tenant(request: Request, tc: TenantAdminOfPlatform, ctx: ContextDep) -> TenantView:
    return await _transition(request, tc, ctx, "suspend")


@router.post(
    "/{tenant}/resume",
    summary="Resume a suspended tenant",
    response_model=TenantView,
    responses=STATE_ERRORS,
)
async def resume_tenant(request: Request, tc: TenantAdminOfPlatform, ctx: ContextDep) -> TenantView:
    return await _transition(request, tc, ctx, "resume")


@router.post(
    "/{tenant}/provision",
    status_code=202,
    summary="Queue the provisioning steps still pending again (after a failure); idempotent",
    response_model=TenantView,
    responses=STATE_ERRORS,
)
async def reprovision_tenant(tc: TenantAdminOfPlatform, ctx: ContextDep) -> TenantView:
    record = await run_in_threadpool(_get, ctx, tc.tenant)
    if record.state is TenantState.DELETING:
        raise Problem(409, "invalid-state", "state: the tenant is being deleted", field="state")
    # Its error goes and it is queued again: the lake worker runs the steps not recorded yet.
    queued = await run_in_threadpool(_registry(ctx).queue, tc.tenant)
    if queued is None:
        raise Problem(404, "tenant-not-found", "no such tenant", field="tenant")
    await run_in_threadpool(audit.record_platform, ctx, tc.principal, "tenant.reprovision", tc.tenant, audit.ACCEPTED)
    return _view(ctx, queued)


@router.delete(
    "/{tenant}",
    status_code=202,
    summary="Delete a tenant and erase all its data (confirm with ?confirm=<tenant id>); the lake worker runs it",
    response_model=TenantView,
    responses={
        **ERRORS,
        **NOT_FOUND,
        422: problem_doc("confirm must repeat the tenant id", "confirmation-required", 422),
    },
)
async def delete_tenant(
    request: Request,
    tc: TenantAdminOfPlatform,
    ctx: ContextDep,
    confirm: Annotated[
        str | None, Query(max_length=40, description="The tenant id again: deleting erases every piece of its data.")
    ] = None,
) -> TenantView:
    await run_in_threadpool(_get, ctx, tc.tenant)
    if confirm != tc.tenant:
        raise Problem(422, "confirmation-required", "confirm: must equal the tenant id", field="confirm")
    registry = _registry(ctx)
    # Queued for the lake worker (state deleting, queued_at): it waits for a provisioning run's lease, then undoes it.
    record = await run_in_threadpool(registry.set_state, tc.tenant, TenantState.DELETING)
    if record is None:
        raise Problem(404, "tenant-not-found", "no such tenant", field="tenant")
    _forget(request, tc.tenant)
    # Its Trino users go now, not when the deprovisioning reaches the access step (after the lake's rows).
    await run_in_threadpool(render_access, ctx, tc.tenant)
    # Rows buffered for the tenant land before the worker drops its folder, never after (recreating it).
    await run_in_threadpool(audit.flush, ctx)
    await run_in_threadpool(audit.record_platform, ctx, tc.principal, "tenant.delete", tc.tenant, audit.ACCEPTED)
    return _view(ctx, record)
