"""GDPR erasure of an asset through the API: ``POST`` answers 202 with a status resource and runs
``metalake lake erase`` (as ``python -m processors.lake.erase``) after the answer; ``GET`` tells how it went.

The URN travels in the body (URNs hold '/') and is validated and canonical. The erasure document and every audit row
hold only its sha256; the URN itself is kept only until the erasure finishes, so an erasure a crash interrupted runs
again (``api.services.provisioning.runs``). The erase command itself writes the ``erase.asset`` audit row with the
counts.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, BackgroundTasks, Response
from fastapi.concurrency import run_in_threadpool

from api.context import ApiContext, ContextDep
from api.deps import TenantAdmin
from api.problems import Problem, problem_doc
from api.routes.tenants import ERRORS
from api.schemas.erasures import ErasureRequest, ErasureView
from api.services import audit
from api.services.erasures import ErasureRecord, ErasureStore
from api.services.provisioning.runs import PendingErasures, erase_asset
from control.auth.principal import Principal
from metalake.urn import AssetUrn, InvalidUrn
from tenants.naming import CONTROL_DATABASE

router = APIRouter(prefix="/v1/tenants/{tenant}/erasures", tags=["gdpr"])


TENANT_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    403: problem_doc("the token lacks tenant:admin", "insufficient-scope", 403),
    404: problem_doc("no such tenant or erasure", "not-found", 404),
}


def _store(ctx: ApiContext) -> ErasureStore:
    return ErasureStore(ctx.mongo[CONTROL_DATABASE])


def _view(record: ErasureRecord) -> ErasureView:
    return ErasureView(
        id=record.id,
        tenant=record.tenant,
        target_hash=record.target_hash,
        include_children=record.include_children,
        state=record.state,
        requested_by=record.requested_by,
        created_at=record.created_at,
        updated_at=record.updated_at,
        counts=dict(record.counts),
        error=record.error,
        action_required=record.action_required,
    )


def _canonical(urn: str) -> str:
    try:
        canonical = str(AssetUrn.parse(urn))
    except InvalidUrn:
        raise Problem(422, "invalid-urn", "urn: not a metalake asset URN", field="urn") from None
    if canonical != urn:
        # Rows hold URNs in canonical form; another spelling would match nothing and "succeed".
        raise Problem(422, "invalid-urn", "urn: not in canonical form", field="urn")
    return urn


def _erase(ctx: ApiContext, principal: Principal, tenant: str, erasure_id: str, urn: str, children: bool) -> None:
    # Under the erasure's lease: a resumer (this or another replica) never runs it at the same time.
    erase_asset(ctx, principal, tenant, erasure_id, urn, children, ctx.settings.api.lease_wait_s)


@router.post(
    "",
    status_code=202,
    summary="Erase an asset (GDPR): every row about its URN, from Delta and MongoDB; runs after the answer",
    response_model=ErasureView,
    responses={**TENANT_ERRORS, 422: problem_doc("invalid or non-canonical URN", "invalid-urn", 422)},
)
async def request_erasure(
    body: ErasureRequest, tc: TenantAdmin, ctx: ContextDep, background: BackgroundTasks, response: Response
) -> ErasureView:
    urn = _canonical(body.urn)
    record = await run_in_threadpool(
        _store(ctx).create, tc.tenant, audit.target_hash(urn), body.include_children, tc.principal.subject
    )
    # Kept until the erasure finishes, so a crash does not lose it (the status document keeps only the hash).
    await run_in_threadpool(PendingErasures(ctx).put, tc.tenant, record.id, urn)
    await run_in_threadpool(audit.record, ctx, tc.tenant, tc.principal, "erasure.request", urn, audit.ACCEPTED)
    background.add_task(_erase, ctx, tc.principal, tc.tenant, record.id, urn, body.include_children)
    response.headers["Location"] = f"/v1/tenants/{tc.tenant}/erasures/{record.id}"
    return _view(record)


@router.get(
    "/{erasure_id}",
    summary="The status of an erasure",
    response_model=ErasureView,
    responses=TENANT_ERRORS,
)
async def get_erasure(erasure_id: str, tc: TenantAdmin, ctx: ContextDep) -> ErasureView:
    record = await run_in_threadpool(_store(ctx).get, tc.tenant, erasure_id)
    if record is None:
        raise Problem(404, "erasure-not-found", "no such erasure", field="erasure_id")
    return _view(record)
