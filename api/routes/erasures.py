"""GDPR erasure of an asset through the API: ``POST`` answers 202 with a status resource and runs
``metalake lake erase`` (as ``python -m processors.lake.erase``) after the answer; ``GET`` tells how it went.

The URN travels in the body (URNs hold '/') and is validated and canonical. The erasure document and every audit row
hold only its sha256; the URN itself is kept only until the erasure finishes, so an erasure a crash interrupted runs
again (``api.provisioning.runs``). The erase command itself writes the ``erase.asset`` audit row with the counts.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, BackgroundTasks, Response
from fastapi.concurrency import run_in_threadpool
from pydantic import BaseModel, Field

from api import audit
from api.context import ApiContext, ContextDep
from api.deps import TenantAdmin
from api.erasures import ErasureRecord, ErasureState, ErasureStore
from api.problems import Problem, problem_doc
from api.provisioning.runs import PendingErasures, erase_asset
from api.routes.tenants import ERRORS
from control.auth.principal import Principal
from metalake.urn import AssetUrn, InvalidUrn
from tenants.naming import CONTROL_DATABASE

router = APIRouter(prefix="/v1/tenants/{tenant}/erasures", tags=["gdpr"])


TENANT_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    403: problem_doc("the token lacks tenant:admin", "insufficient-scope", 403),
    404: problem_doc("no such tenant or erasure", "not-found", 404),
}


class ErasureRequest(BaseModel):
    urn: str = Field(
        min_length=1,
        max_length=2000,
        description="The asset's canonical URN. Every row about it leaves Delta (files vacuumed) and MongoDB.",
        examples=["urn:metalake:postgres:prod/shop/public/customers/email"],
    )
    include_children: bool = Field(default=False, description="Also erase the assets under it (a table's columns).")


class ErasureView(BaseModel):
    id: str = Field(examples=["era_5c2f0e9a4b7d1e3f6a8b9c0d"])
    tenant: str = Field(examples=["acme"])
    target_hash: str = Field(description="sha256 of the URN (the URN itself is not kept).")
    include_children: bool
    state: ErasureState = Field(description="accepted, running, done or failed.")
    requested_by: str
    created_at: datetime
    updated_at: datetime
    counts: dict[str, int] = Field(
        default_factory=dict, description="Rows removed per Delta table and documents per collection (when done)."
    )
    error: str | None = None
    action_required: str | None = Field(
        default=None,
        description="Set on a done erasure when an operator must still act: e.g. Kafka did not confirm the erase's "
        "announcement, so the propagation processor must be restarted to forget the asset.",
    )


def _store(ctx: ApiContext) -> ErasureStore:
    return ErasureStore(ctx.mongo[CONTROL_DATABASE])


def _view(record: ErasureRecord) -> dict[str, Any]:
    return {
        "id": record.id,
        "tenant": record.tenant,
        "target_hash": record.target_hash,
        "include_children": record.include_children,
        "state": record.state,
        "requested_by": record.requested_by,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "counts": dict(record.counts),
        "error": record.error,
        "action_required": record.action_required,
    }


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
) -> dict[str, Any]:
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
async def get_erasure(erasure_id: str, tc: TenantAdmin, ctx: ContextDep) -> dict[str, Any]:
    record = await run_in_threadpool(_store(ctx).get, tc.tenant, erasure_id)
    if record is None:
        raise Problem(404, "erasure-not-found", "no such erasure", field="erasure_id")
    return _view(record)
