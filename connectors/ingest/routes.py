"""``POST /v1/events``: one event, a JSON array, or NDJSON; per-event results; accepted means durable in Kafka.

Every event is checked before anything is published; the accepted ones are published together and the answer is sent
only after Kafka confirmed them. If Kafka does not confirm, the answer is 503 with Retry-After and no event counts as
accepted (a resend may duplicate some in Kafka; consumers deduplicate by event id and version).
"""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter, Request
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse

from connectors.ingest.auth import IngestTenant
from connectors.ingest.parsing import BodyError, split_body
from connectors.ingest.validation import Rejected, Result, item_id, to_event
from connectors.runtime.bodies import read_limited
from connectors.runtime.context import Runtime, RuntimeDep
from connectors.runtime.transforms import Routed
from metalake.events import CloudEvent, spec_for
from metalake.http.problems import Problem
from metalake.kafka import PublishError
from metalake.telemetry import bind_tenant

log = logging.getLogger(__name__)

router = APIRouter(tags=["ingest"])


def check_items(items: list[Any], tenant: str) -> tuple[list[Result], list[CloudEvent]]:
    """Per-item results (accepted ones provisionally) and the events to publish, in request order."""
    results: list[Result] = []
    events: list[CloudEvent] = []
    seen_ids: set[str] = set()
    for index, item in enumerate(items):
        event_id = item_id(item)
        try:
            event = to_event(item, tenant)
            if event.id in seen_ids:
                raise Rejected("id repeats an earlier event of this request", "id")
        except Rejected as exc:
            results.append(Result(index, event_id, "rejected", str(exc), exc.field))
            continue
        seen_ids.add(event.id)
        events.append(event)
        results.append(Result(index, event.id, "accepted"))
    return results, events


def _publish(runtime: Runtime, tenant: str, events: list[CloudEvent]) -> None:
    routed = [Routed(e, spec_for(e.type).topic_class(e.data)) for e in events]
    with bind_tenant(tenant):
        try:
            runtime.publisher.publish(routed)
        except PublishError as exc:
            log.warning("ingest.publish_failed", extra={"retriable": exc.retriable, "events": len(events)})
            raise Problem(
                503,
                "unavailable",
                "Kafka did not confirm the events; none was accepted, send again later",
                headers={"Retry-After": str(runtime.settings.connect.retry_after_s)},
            ) from exc
        log.info("ingest.accepted", extra={"events": len(events)})


@router.post("/v1/events")
async def ingest(request: Request, tenant: IngestTenant, runtime: RuntimeDep) -> JSONResponse:
    """Validate each event, publish the valid ones (confirmed), and answer the result of every event."""
    limits = runtime.settings.connect
    body = await read_limited(request, limits.ingest_max_body_bytes)
    try:
        items = split_body(body, request.headers.get("content-type"), limits.ingest_max_events)
    except BodyError as exc:
        extra = {"line": exc.line} if exc.line is not None else None
        slug = {413: "too-many-events", 415: "unsupported-media-type"}.get(exc.status, "invalid-body")
        raise Problem(exc.status, slug, str(exc), field=exc.field, extra=extra) from None
    results, events = check_items(items, tenant)
    if events:
        await run_in_threadpool(_publish, runtime, tenant, events)
    accepted = len(events)
    return JSONResponse(
        {
            "accepted": accepted,
            "rejected": len(results) - accepted,
            "results": [r.as_dict() for r in results],
        },
        status_code=200,
    )
