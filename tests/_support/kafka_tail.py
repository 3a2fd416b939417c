"""Reading what a test produced to a shared topic: mark the end offsets first, then read from the marks onwards."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from confluent_kafka import Consumer, TopicPartition

from metalake.kafka.config import consumer_config
from ops.settings import Settings


@dataclass(frozen=True)
class Record:
    topic: str
    key: bytes | None
    value: bytes | None
    headers: dict[str, bytes]


def _consumer(settings: Settings) -> Consumer:
    return Consumer(consumer_config(settings, f"it-tail-{uuid.uuid4().hex}"))


def mark(settings: Settings, topic: str) -> dict[int, int]:
    """The current end offset of every partition of ``topic``."""
    consumer = _consumer(settings)
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1] for p in partitions}
    finally:
        consumer.close()


def read_since(
    settings: Settings,
    topic: str,
    marks: dict[int, int],
    keep: Callable[[Record], bool],
    *,
    expect: int,
    timeout_s: float = 20.0,
    settle_s: float = 2.0,
) -> list[Record]:
    """Records after ``marks`` that ``keep`` accepts; waits for ``expect`` of them, then ``settle_s`` more so an
    unexpected extra record is seen too."""
    consumer = _consumer(settings)
    found: list[Record] = []
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in marks.items()])
        deadline = time.monotonic() + timeout_s
        settle_until: float | None = None
        while time.monotonic() < deadline and (settle_until is None or time.monotonic() < settle_until):
            for msg in consumer.consume(num_messages=500, timeout=0.5):
                if msg.error() is not None:
                    continue
                record = Record(
                    msg.topic() or topic, msg.key(), msg.value(), {k: v or b"" for k, v in msg.headers() or []}
                )
                if keep(record):
                    found.append(record)
            if len(found) >= expect and settle_until is None:
                settle_until = time.monotonic() + settle_s
        return found
    finally:
        consumer.close()


def of_tenant(tenant: str) -> Callable[[Record], bool]:
    return lambda r: r.headers.get("ce_tenantid") == tenant.encode() or r.headers.get("tenant_id") == tenant.encode()
