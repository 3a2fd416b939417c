"""API clients of a tenant: create, list, get, rotate, revoke. The secret is in the create and rotate answers only.

Tenant administrators manage their tenant's clients; platform administrators any tenant's. Platform-admin clients
are not made here (``metalake api create-admin``) and are managed in ``api.routes.platform_clients``.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from http import HTTPStatus
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from api import quotas
from api.auth.runtime import AuthRuntime
from api.context import ContextDep
from api.deps import AuthDep, TenantAdmin
from api.problems import MEDIA_TYPE, Problem
from api.schemas.clients import ClientCreate, ClientPage, ClientRotate, ClientView, ClientWithSecret
from api.security import TenantContext
from api.services import audit
from control.auth.clients import ClientConflict, ClientRecord, Role

router = APIRouter(prefix="/v1/tenants/{tenant}/clients", tags=["clients"])


TENANT_ROLES = (Role.READ_ONLY, Role.READ_WRITE, Role.ADMIN)


def _problem_doc(description: str, slug: str, status: int) -> dict[str, Any]:
    example = {"type": f"/problems/{slug}", "title": HTTPStatus(status).phrase, "status": status, "detail": description}
    return {"description": description, "content": {MEDIA_TYPE: {"example": example}}}


# 401, 403 and 429 are documented for every protected route by api.openapi.
ERRORS: dict[int | str, dict[str, Any]] = {
    404: _problem_doc("no such tenant or client", "client-not-found", 404),
}


def client_view(record: ClientRecord) -> ClientView:
    live = record.live_secrets(datetime.now(UTC))
    previous = [s.expires_at for s in live if s.expires_at is not None]
    return ClientView(
        client_id=record.client_id,
        tenant=record.tenant,
        name=record.name,
        role=record.role,
        scopes=list(record.scopes),
        state=record.state,
        created_at=record.created_at,
        updated_at=record.updated_at,
        revoked_at=record.revoked_at,
        secrets_valid=len(live),
        previous_secret_expires_at=max(previous) if previous else None,
    )


def client_with_secret(record: ClientRecord, secret: str) -> ClientWithSecret:
    return ClientWithSecret(**client_view(record).model_dump(), client_secret=secret)


def client_page(records: list[ClientRecord], limit: int) -> ClientPage:
    """A page of ``limit`` clients from ``limit + 1`` read: the extra one only says that there is a next page."""
    page = records[:limit]
    return ClientPage(
        items=[client_view(r) for r in page],
        next_cursor=page[-1].client_id if len(records) > limit else None,
    )


Rotation = Callable[[int], tuple[ClientRecord, str] | None]


async def rotate(auth: AuthRuntime, client_id: str, body: ClientRotate | None, call: Rotation) -> ClientWithSecret:
    """Run ``call`` (a store's rotation, given the overlap) with the answers every client route gives: the overlap
    from the body or ``api.secret_overlap_s``, 409 on a concurrent change or a revoked client, the cache dropped."""
    overlap = auth.settings.api.secret_overlap_s
    if body is not None and body.overlap_seconds is not None:
        overlap = body.overlap_seconds
    try:
        rotated = await run_in_threadpool(call, overlap)
    except ClientConflict:
        raise Problem(409, "conflict", "the client changed concurrently; retry", field="client_id") from None
    if rotated is None:
        raise Problem(409, "client-revoked", "a revoked client cannot be rotated", field="client_id")
    auth.client_cache.invalidate(client_id)
    return client_with_secret(*rotated)


async def _audit(api: ContextDep, ctx: TenantContext, action: str, client_id: str) -> None:
    # Recorded once the change is made: the row says it happened (a failed change raises before this).
    await run_in_threadpool(audit.record, api, ctx.tenant, ctx.principal, action, client_id, audit.DONE)


def _owned(auth: AuthRuntime, ctx: TenantContext, client_id: str) -> ClientRecord:
    record = auth.clients.get(client_id)
    # Another tenant's client answers exactly like a missing one.
    if record is None or record.tenant != ctx.tenant:
        raise Problem(404, "client-not-found", "no such client", field="client_id")
    return record


@router.post(
    "",
    status_code=201,
    summary="Create an API client (the secret is shown once)",
    response_model=ClientWithSecret,
    responses={**ERRORS, **quotas.RESPONSE, 422: _problem_doc("invalid body", "invalid-request", 422)},
)
async def create_client(body: ClientCreate, ctx: TenantAdmin, auth: AuthDep, api: ContextDep) -> ClientWithSecret:
    if body.role not in TENANT_ROLES:
        raise Problem(422, "invalid-request", "role: must be read-only, read-write or admin", field="role")

    def create() -> tuple[ClientRecord, str]:
        with quotas.claim(api, ctx.tenant, quotas.CLIENTS):
            return auth.clients.create(ctx.tenant, body.role, body.name, pii=body.pii)

    record, secret = await run_in_threadpool(create)
    await _audit(api, ctx, "client.create", record.client_id)
    return client_with_secret(record, secret)


@router.get("", summary="List the tenant's API clients", response_model=ClientPage, responses=ERRORS)
async def list_clients(
    ctx: TenantAdmin,
    auth: AuthDep,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size.")] = 100,
    cursor: Annotated[str | None, Query(max_length=200, description="next_cursor of the previous page.")] = None,
) -> ClientPage:
    records = await run_in_threadpool(lambda: auth.clients.list(ctx.tenant, after=cursor, limit=limit + 1))
    return client_page(records, limit)


@router.get("/{client_id}", summary="Get one API client", response_model=ClientView, responses=ERRORS)
async def get_client(client_id: str, ctx: TenantAdmin, auth: AuthDep) -> ClientView:
    return client_view(await run_in_threadpool(_owned, auth, ctx, client_id))


@router.post(
    "/{client_id}/rotate",
    summary="Rotate the client's secret (the new one is shown once)",
    response_model=ClientWithSecret,
    responses={**ERRORS, 409: _problem_doc("concurrent change or revoked client", "conflict", 409)},
)
async def rotate_client(
    client_id: str, ctx: TenantAdmin, auth: AuthDep, api: ContextDep, body: ClientRotate | None = None
) -> ClientWithSecret:
    await run_in_threadpool(_owned, auth, ctx, client_id)
    answer = await rotate(auth, client_id, body, lambda overlap: auth.clients.rotate(client_id, overlap))
    await _audit(api, ctx, "client.rotate", client_id)
    return answer


@router.delete(
    "/{client_id}",
    summary="Revoke the client: its secrets stop working, its tokens are refused",
    response_model=ClientView,
    responses=ERRORS,
)
async def revoke_client(client_id: str, ctx: TenantAdmin, auth: AuthDep, api: ContextDep) -> ClientView:
    await run_in_threadpool(_owned, auth, ctx, client_id)
    record = await run_in_threadpool(auth.clients.revoke, client_id)
    if record is None:
        raise Problem(404, "client-not-found", "no such client", field="client_id")
    auth.client_cache.invalidate(client_id)
    await _audit(api, ctx, "client.revoke", client_id)
    return client_view(record)
