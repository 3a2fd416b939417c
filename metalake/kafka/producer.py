"""A producer that returns only once Kafka has confirmed every event (idempotent, acks=all)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple, Protocol

from confluent_kafka import KafkaError, Message, Producer
from opentelemetry import trace

from metalake.events.envelope import CloudEvent, Headers
from metalake.settings import KernelSettings
from metalake.telemetry.propagation import inject_traceparent

log = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

# Client-side errors worth a retry. librdkafka names local errors with a leading underscore; they are public API.
_RETRIABLE_LOCAL_ERRORS = (KafkaError._MSG_TIMED_OUT, KafkaError._TRANSPORT)  # noqa: SLF001


class PublishError(RuntimeError):
    """At least one event was not confirmed by Kafka; none of the batch may be reported as accepted."""

    def __init__(self, message: str, retriable: bool) -> None:
        super().__init__(message)
        self.retriable = retriable


@dataclass(frozen=True)
class Delivery:
    event_id: str
    topic: str
    partition: int
    offset: int


class RawRecord(NamedTuple):
    """One record as :meth:`EventProducer.publish_raw` sends it; ``id`` only labels results and errors."""

    topic: str
    id: str
    key: bytes | None
    value: bytes | None
    headers: Headers


class EventPublisher(Protocol):
    """What publishes CloudEvents with confirmed delivery (:class:`EventProducer`; tests pass recording fakes):
    returns once Kafka confirmed every event, or raises."""

    def publish(self, events: Sequence[CloudEvent], topic_for: Callable[[CloudEvent], str]) -> object: ...


class EventProducer:
    """Publishes CloudEvents and blocks until each is durable (in the in-sync replicas) or raises."""

    def __init__(self, settings: KernelSettings, **overrides: Any) -> None:  # noqa: ANN401
        from metalake.kafka.config import producer_config

        self._timeout_s = settings.kafka.delivery_timeout_ms / 1000 + 5
        self._producer = Producer(producer_config(settings, **overrides))

    def publish(self, events: Sequence[CloudEvent], topic_for: Callable[[CloudEvent], str]) -> list[Delivery]:
        return self.publish_raw([RawRecord(topic_for(e), e.id, e.key, e.value(), e.headers()) for e in events])

    def publish_raw(self, records: Sequence[RawRecord]) -> list[Delivery]:
        """Publish records and wait for Kafka's confirmation of each, in one ``kafka.produce`` span: a record
        without a ``ce_traceparent`` gets this span's, so its consumers continue the trace from here (one that came
        with one, an event of a traced request or a change of a traced event, keeps it)."""
        topics = sorted({r.topic for r in records})
        attributes: dict[str, str | int] = {"messaging.system": "kafka", "messaging.batch.message_count": len(records)}
        with tracer.start_as_current_span("kafka.produce", kind=trace.SpanKind.PRODUCER, attributes=attributes) as span:
            if len(topics) == 1:
                span.set_attribute("messaging.destination.name", topics[0])
            return self._send([r._replace(headers=inject_traceparent(list(r.headers))) for r in records])

    def _send(self, records: Sequence[RawRecord]) -> list[Delivery]:
        results: dict[int, Delivery] = {}
        errors: list[tuple[str, KafkaError]] = []

        def on_delivery(index: int, record_id: str) -> Callable[[KafkaError | None, Message], None]:
            def callback(err: KafkaError | None, msg: Message) -> None:
                if err is not None:
                    errors.append((record_id, err))
                else:
                    results[index] = Delivery(record_id, msg.topic() or "", msg.partition() or 0, msg.offset() or 0)

            return callback

        for index, record in enumerate(records):
            while True:
                try:
                    self._producer.produce(
                        record.topic,
                        value=record.value,
                        key=record.key,
                        headers=list(record.headers),
                        on_delivery=on_delivery(index, record.id),
                    )
                    break
                except BufferError:
                    # Local queue full: serve delivery reports to make room, then retry this record.
                    self._producer.poll(0.1)
        remaining = self._producer.flush(self._timeout_s)
        if remaining:
            raise PublishError(f"{remaining} event(s) not confirmed by Kafka within {self._timeout_s:.0f}s", True)
        if errors:
            record_id, err = errors[0]
            raise PublishError(
                f"{len(errors)} event(s) rejected by Kafka; first: {record_id}: {err.name()}: {err.str()}",
                err.retriable() or err.code() in _RETRIABLE_LOCAL_ERRORS,
            )
        return [results[i] for i in range(len(records))]

    def close(self) -> None:
        self._producer.flush(self._timeout_s)

    def __enter__(self) -> EventProducer:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
