"""The one way an HTTP source of the worker (the ingest API, OpenLineage) hands its events to Kafka: all of them
confirmed, or a 503 with Retry-After and none accepted (the caller sends again; the events' ids make that safe). A
tenant over its events budget (``connect.tenant_events_per_s``) gets a 429 with Retry-After, none accepted: the
request's admission (:mod:`.admission`) charged an estimate before its body was read, and the events are settled
here, before anything is published."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from connectors.runtime.admission import Ticket
from connectors.runtime.context import Runtime
from connectors.runtime.publisher import Encoded
from connectors.runtime.transforms import Routed
from metalake.events import CloudEvent, spec_for
from metalake.http.problems import Problem
from metalake.kafka import PublishError
from metalake.telemetry import bind_tenant
from metalake.telemetry.metrics import EVENTS

log = logging.getLogger(__name__)


def publish_confirmed(
    runtime: Runtime, tenant: str, events: Sequence[CloudEvent], *, source: str, ticket: Ticket
) -> None:
    """Publish ``events`` to their topic classes and wait for Kafka's confirmation, once ``ticket`` (the request's
    admission) settled them against the tenant's budget; ``source`` names the route in the log
    (``<source>.publish_failed``)."""
    routed = [Routed(e, spec_for(e.type).topic_class(e.data)) for e in events]
    _confirmed(runtime, tenant, len(routed), lambda: runtime.publisher.publish(routed), source, ticket)


def publish_encoded_confirmed(
    runtime: Runtime, tenant: str, encoded: Sequence[Encoded], *, source: str, ticket: Ticket
) -> None:
    """:func:`publish_confirmed` for events already encoded where they were built (the parse pool's processes)."""
    _confirmed(
        runtime, tenant, len(encoded), lambda: runtime.publisher.publish_encoded(tenant, encoded), source, ticket
    )


def _confirmed(
    runtime: Runtime, tenant: str, count: int, send: Callable[[], object], source: str, ticket: Ticket
) -> None:
    ticket.settle(count)
    with bind_tenant(tenant):
        try:
            send()
            EVENTS.add(count, {"source": source, "outcome": "accepted", "reason": "none"})
        except PublishError as exc:
            log.warning(f"{source}.publish_failed", extra={"retriable": exc.retriable, "events": count})
            raise Problem(
                503,
                "unavailable",
                "Kafka did not confirm the events; none was accepted, send again later",
                headers={"Retry-After": str(runtime.settings.connect.retry_after_s)},
            ) from exc
