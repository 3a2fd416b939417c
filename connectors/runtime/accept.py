"""The one way an HTTP source of the worker (a webhook, the ingest API, OpenLineage) hands a request's records to
Kafka: all of them confirmed, or a 503 with Retry-After and none accepted (the caller sends again; the events' ids
make that safe). A tenant over its events budget (``connect.tenant_events_per_s``) gets a 429 with Retry-After, none
accepted: the request's admission (:mod:`.admission`) charged an estimate before its body was read, and the events
are settled here, before anything is published."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from connectors.runtime.admission import Ticket
from connectors.runtime.context import Runtime
from connectors.runtime.publisher import Encoded, Publisher
from connectors.runtime.transforms import Routed
from control.connectors.reasons import safe_reason
from metalake.events import CloudEvent, spec_for
from metalake.kafka import PublishError, RawRecord
from metalake.telemetry import bind_tenant
from metalake.telemetry.metrics import EVENTS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Batch:
    """What one request publishes for ``tenant``: its events, routed to their topic classes (``routed``) or encoded
    where they were built (``encoded``: the parse pool's, :mod:`.offload`), and the dead letters it made (``dead``)."""

    tenant: str
    routed: Sequence[Routed] = ()
    encoded: Sequence[Encoded] = ()
    dead: Sequence[RawRecord] = ()

    @classmethod
    def of(cls, tenant: str, events: Sequence[CloudEvent]) -> Batch:
        """``events`` routed to their event type's topic class."""
        return cls(tenant, [Routed(e, spec_for(e.type).topic_class(e.data)) for e in events])

    @property
    def events(self) -> int:
        return len(self.routed) + len(self.encoded)


def publish_confirmed(runtime: Runtime, batch: Batch, *, source: str, ticket: Ticket | None = None) -> None:
    """Publish ``batch`` and return once Kafka confirmed every record, or raise the 503 that says none was accepted.

    ``ticket`` (the request's admission, if it was admitted) first settles the events against the tenant's budget;
    ``source`` labels the accepted events in ``metalake_events_total`` and names the route in the log
    (``<source>.publish_failed``).
    """
    if ticket is not None:
        ticket.settle(batch.events)
    with bind_tenant(batch.tenant):
        try:
            _send(runtime.publisher, batch)
        except PublishError as exc:
            extra = {"retriable": exc.retriable, "events": batch.events, "error": safe_reason(exc)}
            log.warning(f"{source}.publish_failed", extra=extra)
            raise runtime.unavailable("Kafka did not confirm the events; none was accepted, send again later") from exc
    EVENTS.add(batch.events, {"source": source, "outcome": "accepted", "reason": "none"})


def _send(publisher: Publisher, batch: Batch) -> None:
    # Only the parts the batch has: an empty one costs nothing, not even publish_encoded's tenant lookup.
    if batch.routed:
        publisher.publish(batch.routed)
    if batch.encoded:
        publisher.publish_encoded(batch.tenant, batch.encoded)
    if batch.dead:
        publisher.publish_dead_letters(batch.dead)
