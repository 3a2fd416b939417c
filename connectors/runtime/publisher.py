"""Publishing to the topics ``tenants.naming`` gives, through :class:`EventProducer` (returns once confirmed)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

from connectors.runtime.errors import DeadLetterRecord
from connectors.runtime.transforms import Routed
from metalake.events.envelope import Headers
from metalake.kafka import Delivery, EventProducer, PublishError
from metalake.settings import Settings
from metalake.telemetry import inject_traceparent
from tenants.naming import dlq_topic, names_for

DLQ_TOPIC = dlq_topic("connectors")
# (topic, id for results and errors, key, value, headers), as EventProducer.publish_raw takes them.
RawRecord = tuple[str, str, bytes | None, bytes | None, Headers]


class Publisher:
    """Routes and publishes events and dead letters; every method returns only after Kafka confirmed every record.

    Raises :class:`PublishError` otherwise (``retriable`` tells whether a resend may succeed); then none of the batch
    may be reported as accepted. Pooled tenants only so far: the tier lookup arrives with the tenants registry.
    """

    def __init__(self, settings: Settings, producer: EventProducer | None = None) -> None:
        self._settings = settings
        self._lake_root: Path = settings.lake_root
        self._lock = threading.Lock()
        self._producer = producer or self._new_producer()

    def _new_producer(self) -> EventProducer:
        # The worker answers its callers within publish_timeout_ms: a sender waiting on a dead broker retries later.
        return EventProducer(self._settings, **{"delivery.timeout.ms": self._settings.connect.publish_timeout_ms})

    def topic_for(self, routed: Routed) -> str:
        return names_for(routed.event.tenantid, self._lake_root).topic(routed.topic_class)

    def publish(self, routed: Sequence[Routed]) -> list[Delivery]:
        records: list[RawRecord] = [
            (self.topic_for(r), r.event.id, r.event.key, r.event.value(), inject_traceparent(r.event.headers()))
            for r in routed
        ]
        return self._send(records)

    def publish_dead_letters(self, letters: Sequence[DeadLetterRecord]) -> list[Delivery]:
        records: list[RawRecord] = [
            (DLQ_TOPIC, f"dlq-{i}", d.key, d.value, list(d.headers)) for i, d in enumerate(letters)
        ]
        return self._send(records)

    def _send(self, records: Sequence[RawRecord]) -> list[Delivery]:
        if not records:
            return []
        producer = self._producer
        try:
            return producer.publish_raw(records)
        except PublishError as exc:
            if not exc.retriable:
                # A fatal producer error (e.g. an idempotence sequence gap) poisons the client: start a fresh one.
                self._replace(producer)
            raise

    def _replace(self, broken: EventProducer) -> None:
        with self._lock:
            if self._producer is broken:
                self._producer = self._new_producer()

    def close(self) -> None:
        self._producer.close()
