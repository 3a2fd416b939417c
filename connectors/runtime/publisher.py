"""Publishing to the topics ``tenants.naming`` gives, through :class:`EventProducer` (returns once confirmed)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import NamedTuple

from pymongo.errors import PyMongoError

from connectors.runtime.transforms import Routed
from connectors.settings import WorkerSettings
from metalake.events import CloudEvent, spec_for
from metalake.events.envelope import Headers
from metalake.events.registry import TopicClass
from metalake.kafka import Delivery, EventProducer, PublishError, RawRecord
from tenants.registry import TenantDirectory


class Encoded(NamedTuple):
    """An event of one tenant as Kafka gets it, encoded where it was built (a process of the worker's parse pool:
    :mod:`connectors.runtime.offload`), so the worker only hands it to the producer."""

    topic_class: TopicClass
    id: str
    key: bytes
    value: bytes
    headers: Headers


def encode(events: Sequence[CloudEvent]) -> list[Encoded]:
    """``events`` as :meth:`Publisher.publish_encoded` takes them (routed to their default topic class)."""
    return [Encoded(spec_for(e.type).topic_class(e.data), e.id, e.key, e.value(), e.headers()) for e in events]


class Publisher:
    """Routes and publishes events and dead letters; every method returns only after Kafka confirmed every record.

    Raises :class:`PublishError` otherwise (``retriable`` tells whether a resend may succeed); then none of the batch
    may be reported as accepted. A dedicated tenant's events go to its own topics (the tenants registry, cached).
    """

    def __init__(
        self, settings: WorkerSettings, producer: EventProducer | None = None, directory: TenantDirectory | None = None
    ) -> None:
        self._settings = settings
        self._directory = directory or TenantDirectory.connect(settings)
        self._lock = threading.Lock()
        self._producer = producer or self._new_producer()

    @property
    def directory(self) -> TenantDirectory:
        """The tenants directory (thread-safe), shared with the publishers of a crawl's tasks."""
        return self._directory

    def _new_producer(self) -> EventProducer:
        # The worker answers its callers within publish_timeout_ms: a sender waiting on a dead broker retries later.
        return EventProducer(self._settings, **{"delivery.timeout.ms": self._settings.connect.publish_timeout_ms})

    def topic_for(self, routed: Routed) -> str:
        return self._directory.names(routed.event.tenantid).topic(routed.topic_class)

    def publish(self, routed: Sequence[Routed]) -> list[Delivery]:
        try:
            records: list[RawRecord] = [
                RawRecord(self.topic_for(r), r.event.id, r.event.key, r.event.value(), r.event.headers())
                for r in routed
            ]
        except PyMongoError as exc:
            # The tier of a tenant is unknown while the control plane is unreachable: the sender retries later.
            raise PublishError(f"tenant lookup failed: {type(exc).__name__}", retriable=True) from exc
        return self._send(records)

    def publish_encoded(self, tenant: str, encoded: Sequence[Encoded]) -> list[Delivery]:
        """Publish ``tenant``'s events as :func:`encode` left them (as :meth:`publish` would have)."""
        try:
            names = self._directory.names(tenant)
        except PyMongoError as exc:
            raise PublishError(f"tenant lookup failed: {type(exc).__name__}", retriable=True) from exc
        return self._send([RawRecord(names.topic(e.topic_class), e.id, e.key, e.value, e.headers) for e in encoded])

    def publish_dead_letters(self, letters: Sequence[RawRecord]) -> list[Delivery]:
        """Publish dead letters as :meth:`ErrorPolicy.dead_letter` built them (to the connectors DLQ topic)."""
        return self._send(letters)

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
