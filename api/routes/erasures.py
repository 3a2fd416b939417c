"""GDPR erasure of an asset through the API: ``POST`` queues it and answers 202 with a status resource; the lake
worker (``metalake lake worker``) runs ``metalake lake erase`` for it where Spark work runs; ``GET`` tells how it went.

The queue is bounded (``control.erasures``): 429 with ``Retry-After`` when it is full or the tenant has its limit of
unfinished erasures, 409 when the same target is already queued or running for the tenant.

The URN travels in the body (URNs hold '/'); any valid spelling is accepted and made canonical. The erasure
document and every audit row hold only its keyed hash (HMAC under a key derived from the KEK, ``control.erased``:
not testable against guessed URNs without the key); the URN itself is kept only until the erasure finishes, so an
erasure a crash interrupted runs again. The erase command itself writes the ``erase.asset`` audit row with the
counts, the worker ``erasure.finish``.
"""

from __future__ import annotations

import functools
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Response
from fastapi.concurrency import run_in_threadpool

from api.context import ApiContext, ContextDep
from api.deps import TenantAdmin
from api.problems import Problem, problem_doc
from api.routes.tenants import ERRORS
from api.schemas.erasures import ErasureRequest, ErasureView
from api.services import audit
from api.services.erasures import AlreadyQueued, ErasureQueue, ErasureRecord, QueueFull, queue
from control.erased import urn_hasher
from metalake.urn import InvalidUrn, canonical_urn

router = APIRouter(prefix="/v1/tenants/{tenant}/erasures", tags=["gdpr"])


TENANT_ERRORS: dict[int | str, dict[str, Any]] = {
    **ERRORS,
    403: problem_doc("the token lacks tenant:admin", "insufficient-scope", 403),
    404: problem_doc("no such tenant or erasure", "not-found", 404),
}


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
    """Any valid spelling of the URN, in canonical form: rows are stored canonical, and the erase also finds rows
    stored under another spelling of it before URNs were canonicalised (``processors.lake.scope``)."""
    try:
        return canonical_urn(urn)
    except InvalidUrn:
        raise Problem(422, "invalid-urn", "urn: not a metalake asset URN", field="urn") from None


def erasure_queue(ctx: ContextDep) -> ErasureQueue:
    return queue(ctx)


QueueDep = Annotated[ErasureQueue, Depends(erasure_queue)]


def _enqueue(
    ctx: ApiContext, queued: ErasureQueue, tenant: str, urn: str, include_children: bool, requested_by: str
) -> ErasureRecord:
    try:
        return queued.enqueue(tenant, urn, urn_hasher(ctx.settings).digest(urn), include_children, requested_by)
    except AlreadyQueued as exc:
        raise Problem(
            409,
            "erasure-in-progress",
            f"urn: an erasure of this asset is already queued or running ({exc.existing})",
            field="urn",
            extra={"erasure": exc.existing},
        ) from None
    except QueueFull as exc:
        what = "the erasure queue is full" if exc.scope == "global" else "the tenant has its limit of erasures"
        raise Problem(
            429,
            "too-many-erasures",
            f"{what} ({exc.limit} unfinished); retry later",
            headers={"Retry-After": str(ctx.settings.erasure.retry_after_s)},
        ) from None


@router.post(
    "",
    status_code=202,
    summary="Erase an asset (GDPR): every row about its URN, from Delta and MongoDB; queued for the lake worker",
    response_model=ErasureView,
    responses={
        **TENANT_ERRORS,
        409: problem_doc("the same asset is already queued or running", "erasure-in-progress", 409),
        422: problem_doc("not a metalake asset URN", "invalid-urn", 422),
        429: problem_doc("the queue or the tenant's share of it is full (Retry-After)", "too-many-erasures", 429),
    },
)
async def request_erasure(
    body: ErasureRequest, tc: TenantAdmin, ctx: ContextDep, queued: QueueDep, response: Response
) -> ErasureView:
    urn = _canonical(body.urn)
    subject = tc.principal.subject
    record = await run_in_threadpool(_enqueue, ctx, queued, tc.tenant, urn, body.include_children, subject)
    await run_in_threadpool(
        functools.partial(audit.record, hashed=record.target_hash),
        ctx,
        tc.tenant,
        tc.principal,
        "erasure.request",
        urn,
        audit.ACCEPTED,
    )
    response.headers["Location"] = f"/v1/tenants/{tc.tenant}/erasures/{record.id}"
    return _view(record)


@router.get(
    "/{erasure_id}",
    summary="The status of an erasure",
    response_model=ErasureView,
    responses=TENANT_ERRORS,
)
async def get_erasure(erasure_id: str, tc: TenantAdmin, queued: QueueDep) -> ErasureView:
    record = await run_in_threadpool(queued.store.get, tc.tenant, erasure_id)
    if record is None:
        raise Problem(404, "erasure-not-found", "no such erasure", field="erasure_id")
    return _view(record)
