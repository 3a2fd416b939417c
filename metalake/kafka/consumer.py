"""A consumer that commits offsets only after the caller's side effects for a batch are durable."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaException, Message

from metalake.http.health import LOOP
from metalake.settings import Settings

log = logging.getLogger(__name__)

BatchHandler = Callable[[Sequence[Message]], None]


class Received(Protocol):
    """The slice of a consumed Kafka message that processors read (confluent_kafka's ``Message`` has it; tests pass
    small fakes)."""

    def key(self) -> bytes | None: ...
    def headers(self) -> Any: ...  # list of (name, bytes) pairs; the stub's union also admits str and dict
    def value(self) -> bytes | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...


class BatchConsumer:
    """Polls batches and hands them to a handler; commits synchronously after the handler returns.

    If the handler raises, nothing is committed and the exception propagates: the process should stop, and a
    restart re-delivers the batch (at-least-once into idempotent stores).
    """

    def __init__(self, settings: Settings, group_id: str, topics: Sequence[str], **overrides: Any) -> None:
        from metalake.kafka.config import consumer_config

        self._consumer = Consumer(consumer_config(settings, group_id, **overrides))
        self._consumer.subscribe(list(topics))

    def poll_batch(self, max_records: int = 500, timeout_s: float = 1.0) -> list[Message]:
        messages = self._consumer.consume(num_messages=max_records, timeout=timeout_s)
        LOOP.beat()  # the health server's liveness: this process's loop still polls
        good: list[Message] = []
        for msg in messages:
            err = msg.error()
            if err is None:
                good.append(msg)
            elif err.fatal():
                raise KafkaException(err)
            else:
                log.warning("kafka.consume_error", extra={"error": err.str()})
        return good

    def process_once(self, handler: BatchHandler, max_records: int = 500, timeout_s: float = 1.0) -> int:
        batch = self.poll_batch(max_records, timeout_s)
        if not batch:
            return 0
        handler(batch)
        self._consumer.commit(asynchronous=False)
        return len(batch)

    def close(self) -> None:
        self._consumer.close()
