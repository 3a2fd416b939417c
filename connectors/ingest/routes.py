"""``POST /v1/events``: one event, a JSON array, or NDJSON; per-event results; accepted means durable in Kafka.

Every event is checked before anything is published; the accepted ones are published together and the answer is sent
only after Kafka confirmed them. If Kafka does not confirm, the answer is 503 with Retry-After and no event counts as
accepted (a resend may duplicate some in Kafka; consumers deduplicate by event id and version).

An event that may unmask PII (:func:`control.auth.pii.weakening`: a PII tag removed or withdrawn, added without
spreading, an edge stopping it; :func:`control.auth.pii.withdraws`: an edge removed or an asset deleted that a live
propagated PII tag travelled) needs the caller's PII grant: without it the whole request is refused, 403
``pii-grant-required`` naming the event (``index``) and its field, nothing published. Every such event, accepted or
refused, is audited in the tenant's audit table (actor: the token's client id or ``write-key:<key id>``; target: the
URN and tag, hashed), the accepted ones once Kafka confirmed them and before the answer.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pymongo.errors import PyMongoError

from connectors.ingest.auth import IngestCaller, IngestCallerDep
from connectors.ingest.parsing import BodyError, split_body
from connectors.ingest.validation import Rejected, Result, item_id, to_event
from connectors.runtime.accept import Batch, publish_confirmed
from connectors.runtime.admission import Ticket
from connectors.runtime.bodies import read_limited
from connectors.runtime.context import Runtime, RuntimeDep
from connectors.runtime.tracing import answer_traceparent, intake_span
from control.audit import ACCEPTED, REFUSED, AuditRow, audit_row
from control.auth.pii import EDGE_ADDED, EDGE_REMOVED, LINEAGE_CUTS, Weakening, cut_urns, weakening, withdraws
from metalake.events import CloudEvent
from metalake.http.problems import Problem
from metalake.telemetry import bind_tenant
from metalake.telemetry.metrics import EVENTS

log = logging.getLogger(__name__)

router = APIRouter(tags=["ingest"])


def check_items(items: list[Any], tenant: str, actor: str | None = None) -> tuple[list[Result], list[CloudEvent]]:
    """Per-item results (accepted ones provisionally) and the events to publish, in request order; ``actor`` (the
    credential's) replaces the ``actor`` the body gives."""
    results: list[Result] = []
    events: list[CloudEvent] = []
    seen_ids: set[str] = set()
    for index, item in enumerate(items):
        event_id = item_id(item)
        try:
            event = to_event(item, tenant, actor)
            if event.id in seen_ids:
                raise Rejected("id repeats an earlier event of this request", "id")
        except Rejected as exc:
            results.append(Result(index, event_id, "rejected", str(exc), exc.field))
            continue
        seen_ids.add(event.id)
        events.append(event)
        results.append(Result(index, event.id, "accepted"))
    return results, events


# The audit action of each event type that may weaken a PII mask (the admin API's names for the same changes).
_ACTIONS = {
    "io.metalake.classification.added.v1": "asset.tag.add",
    "io.metalake.classification.removed.v1": "asset.tag.remove",
    "io.metalake.classification.unpropagated.v1": "asset.tag.unpropagate",
    EDGE_ADDED: "lineage.edge.add",
    EDGE_REMOVED: "lineage.edge.remove",
    "io.metalake.asset.deleted.v1": "asset.delete",
}


@dataclass(frozen=True)
class PiiChange:
    """An accepted event of the request that may unmask PII: its index in the request and why."""

    index: int
    event: CloudEvent
    reason: Weakening


def pii_changes(
    runtime: Runtime, tenant: str, results: list[Result], events: list[CloudEvent], patterns: list[str]
) -> list[PiiChange]:
    """The request's accepted events that may unmask PII (``events`` are the accepted ``results``, in order). Edge
    removals and asset deletions are looked up in the tenant's propagated tags (one query per request)."""
    indexed = list(zip([r.index for r in results if r.status == "accepted"], events, strict=True))
    urns = [u for _, e in indexed for u in cut_urns(e.type, e.data)]
    propagated: list[dict[str, Any]] = []
    if urns and runtime.propagated is not None:
        try:
            propagated = runtime.propagated(tenant, urns, patterns)
        except PyMongoError:
            log.warning("ingest.lineage_unavailable", extra={"events": len(urns)})
            raise runtime.unavailable(
                "the tenant's lineage cannot be read to check the deletions; none was accepted, send again later"
            ) from None
    out = []
    for index, event in indexed:
        found = weakening(event.type, event.data, patterns)
        if found is None and event.type in LINEAGE_CUTS and propagated:
            found = withdraws(event.type, event.data, propagated, patterns)
        if found is not None:
            out.append(PiiChange(index, event, found))
    return out


def _protective(runtime: Runtime, tenant: str) -> list[str]:
    """The tag patterns whose removal needs the PII grant: PII tags and the tenant's engines' consent tags."""
    access = runtime.settings.access
    if runtime.protective is None:
        return [*access.pii_tags, *access.protective_tags]
    try:
        return list(runtime.protective(tenant))
    except PyMongoError:
        log.warning("ingest.engines_unavailable")
        raise runtime.unavailable(
            "the tenant's protective tags cannot be read; nothing was accepted, send again later"
        ) from None


def _audit_rows(caller: IngestCaller, changes: list[PiiChange], result: str) -> list[AuditRow]:
    rows = []
    for change in changes:
        data = change.event.data
        if change.event.type in (EDGE_ADDED, EDGE_REMOVED):
            target = f"{data['urn']}|{data['upstream']}"
        elif "tag" in data:
            target = f"{data['urn']}|{data['tag']}"
        else:
            target = str(data["urn"])
        rows.append(audit_row(caller.actor, _ACTIONS[change.event.type], target, result, {"pii": 1}))
    return rows


def _audit(runtime: Runtime, caller: IngestCaller, changes: list[PiiChange], result: str) -> None:
    if runtime.audit is None:
        # Accepted changes never get here without an audit log (the route answers 503 first): this is a refusal.
        log.warning("ingest.pii_refusal_not_audited", extra={"events": len(changes)})
        return
    runtime.audit.record(caller.tenant, _audit_rows(caller, changes, result))
    log.info("ingest.pii_audited", extra={"events": len(changes), "result": result})


def _publish(runtime: Runtime, tenant: str, events: list[CloudEvent], ticket: Ticket) -> None:
    publish_confirmed(runtime, Batch.of(tenant, events), source="ingest", ticket=ticket)
    with bind_tenant(tenant):
        log.info("ingest.accepted", extra={"events": len(events)})


def decode(
    body: bytes, content_type: str | None, max_events: int, tenant: str, actor: str
) -> tuple[list[Result], list[CloudEvent]]:
    """The request's per-event results and events (:func:`check_items`), or the :class:`Problem` that refuses the
    body. CPU work of plain values: it runs in the worker's pool of processes for a large body
    (:mod:`connectors.runtime.offload`)."""
    try:
        items = split_body(body, content_type, max_events)
    except BodyError as exc:
        extra = {"line": exc.line} if exc.line is not None else None
        slug = {413: "too-many-events", 415: "unsupported-media-type"}.get(exc.status, "invalid-body")
        raise Problem(exc.status, slug, str(exc), field=exc.field, extra=extra) from None
    return check_items(items, tenant, actor)


@router.post("/v1/events")
async def ingest(request: Request, caller: IngestCallerDep, runtime: RuntimeDep) -> JSONResponse:
    """Validate each event, publish the valid ones (confirmed), and answer the result of every event."""
    # Admitted (or refused) once the credential named the tenant, before a byte of the body is read.
    with (
        runtime.admit(caller.tenant, request.headers.get("content-length")) as ticket,
        intake_span("connect.ingest", request.headers.get("traceparent"), {"metalake.tenant": caller.tenant}) as span,
    ):
        return answer_traceparent(await _ingest(request, caller, runtime, ticket), span)


async def _ingest(request: Request, caller: IngestCaller, runtime: Runtime, ticket: Ticket) -> JSONResponse:
    tenant = caller.tenant
    limits = runtime.settings.connect
    body = await read_limited(request, limits.ingest_max_body_bytes)
    content_type = request.headers.get("content-type")
    results, events = await runtime.parse(
        tenant, len(body), decode, body, content_type, limits.ingest_max_events, tenant, caller.actor
    )
    patterns = await run_in_threadpool(_protective, runtime, tenant)
    changes = await run_in_threadpool(pii_changes, runtime, tenant, results, events, patterns)
    if changes and not caller.pii:
        first = changes[0]
        # One row for the refused request (not one per event): a refused flood costs one commit per request.
        await run_in_threadpool(_audit, runtime, caller, [first], REFUSED)
        raise Problem(
            403,
            "pii-grant-required",
            f"event {first.index}: {first.reason.reason}; nothing was accepted",
            field=first.reason.field,
            extra={"index": first.index},
        )
    if changes and runtime.audit is None:
        raise Problem(503, "unavailable", "this worker cannot audit PII changes; none was accepted")
    if events:
        await run_in_threadpool(_publish, runtime, tenant, events, ticket)
    else:
        ticket.settle(0)
    if changes:
        await run_in_threadpool(_audit, runtime, caller, changes, ACCEPTED)
    accepted = len(events)
    if len(results) > accepted:  # accepted ones are counted once Kafka confirmed them (runtime.accept)
        EVENTS.add(len(results) - accepted, {"source": "ingest", "outcome": "refused", "reason": "invalid"})
    return JSONResponse(
        {
            "accepted": accepted,
            "rejected": len(results) - accepted,
            "results": [r.as_dict() for r in results],
        },
        status_code=200,
    )
