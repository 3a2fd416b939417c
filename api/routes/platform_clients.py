"""Platform-admin API clients: list, get, rotate, revoke (``platform:admin`` only). The new secret is in the rotate
answer only. They are created on the host (``metalake api create-admin``), which an API caller cannot bypass."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi.concurrency import run_in_threadpool

from api.context import ContextDep
from api.deps import AuthDep, PlatformAdmin
from api.problems import Problem, problem_doc
from api.routes.clients import client_page, client_view, rotate
from api.schemas.clients import ClientPage, ClientRotate, ClientView, ClientWithSecret
from api.services import platform_clients
from control.auth.clients import ClientRecord

router = APIRouter(prefix="/v1/platform/clients", tags=["platform clients"])

# 401, 403 and 429 are documented for every protected route by api.openapi.
ERRORS: dict[int | str, dict[str, Any]] = {
    404: problem_doc("no such platform-admin client", "client-not-found", 404),
}


def _not_found() -> Problem:
    # A tenant's client id answers like a missing one: these routes manage platform admins only.
    return Problem(404, "client-not-found", "no such platform-admin client", field="client_id")


def _admin(auth: AuthDep, client_id: str) -> ClientRecord:
    record = platform_clients.get_admin(auth.clients, client_id)
    if record is None:
        raise _not_found()
    return record


@router.get("", summary="List the platform-admin API clients (id order)", response_model=ClientPage, responses=ERRORS)
async def list_platform_clients(
    _: PlatformAdmin,
    auth: AuthDep,
    limit: Annotated[int, Query(ge=1, le=500, description="Page size.")] = 100,
    cursor: Annotated[str | None, Query(max_length=200, description="next_cursor of the previous page.")] = None,
) -> ClientPage:
    records = await run_in_threadpool(lambda: platform_clients.list_admins(auth.clients, after=cursor, limit=limit + 1))
    return client_page(records, limit)


@router.get("/{client_id}", summary="Get one platform-admin API client", response_model=ClientView, responses=ERRORS)
async def get_platform_client(client_id: str, _: PlatformAdmin, auth: AuthDep) -> ClientView:
    return client_view(await run_in_threadpool(_admin, auth, client_id))


@router.post(
    "/{client_id}/rotate",
    summary="Rotate a platform admin's secret (the new one is shown once)",
    response_model=ClientWithSecret,
    responses={**ERRORS, 409: problem_doc("concurrent change or revoked client", "conflict", 409)},
)
async def rotate_platform_client(
    client_id: str, principal: PlatformAdmin, auth: AuthDep, api: ContextDep, body: ClientRotate | None = None
) -> ClientWithSecret:
    await run_in_threadpool(_admin, auth, client_id)
    return await rotate(
        auth,
        client_id,
        body,
        lambda overlap: platform_clients.rotate_admin(api, auth.clients, principal, client_id, overlap),
    )


@router.delete(
    "/{client_id}",
    summary="Revoke a platform admin: its secrets stop working, its tokens are refused",
    response_model=ClientView,
    responses={**ERRORS, 409: problem_doc("the last active platform admin (pass force=true)", "last-admin", 409)},
)
async def revoke_platform_client(
    client_id: str,
    principal: PlatformAdmin,
    auth: AuthDep,
    api: ContextDep,
    force: Annotated[
        bool, Query(description="Revoke even the last active platform admin (then only the host can make one).")
    ] = False,
) -> ClientView:
    try:
        record = await run_in_threadpool(
            lambda: platform_clients.revoke_admin(api, auth.clients, principal, client_id, force=force)
        )
    except platform_clients.LastPlatformAdmin:
        raise Problem(
            409, "last-admin", "the last active platform admin; pass force=true to revoke it", field="client_id"
        ) from None
    if record is None:
        raise _not_found()
    auth.client_cache.invalidate(client_id)
    return client_view(record)
