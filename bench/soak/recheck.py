"""``bench/soak.py --recheck``: Delta's history checked again, later, against Kafka itself. When the run's drain timed
out (the lake query still behind), the check at the end cannot tell a lost event from one still in Kafka; this one
waits as long as it is given, then compares per event id: what the ingest API put in the pooled event topics (an
accepted request is durable there) for the run's tenants since the run began, against Delta's ``events``."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Collection
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from metalake.kafka.config import consumer_config
from metalake.settings import Settings
from soak.catalog import SOURCE
from tenants.naming import event_topics


def _assign_since(consumer: Consumer, since_ms: int) -> dict[tuple[str, int], int]:
    """Assign every partition of the event topics from ``since_ms``; their end offsets now."""
    wanted = []
    for topic in event_topics():
        partitions = consumer.list_topics(topic, timeout=30).topics[topic].partitions
        wanted += [TopicPartition(topic, p, since_ms) for p in partitions]
    starts = [tp for tp in consumer.offsets_for_times(wanted, timeout=30) if tp.offset >= 0]
    ends = {(tp.topic, tp.partition): consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in starts}
    consumer.assign(starts)
    return {k: v for k, v in ends.items() if v > 0}


def _ours(headers: list[tuple[str, bytes | None]] | None, tenants: Collection[str]) -> str | None:
    found = {k: (v or b"").decode() for k, v in headers or [] if k in ("ce_id", "ce_source", "ce_tenantid")}
    return found.get("ce_id") if found.get("ce_source") == SOURCE and found.get("ce_tenantid") in tenants else None


def kafka_ids(settings: Settings, tenants: Collection[str], since_ms: int) -> Counter[str]:
    """Event id -> records in the event topics, for the bench's events of ``tenants`` since ``since_ms``."""
    consumer = Consumer({**consumer_config(settings, "soak-recheck"), "enable.auto.commit": False})
    out: Counter[str] = Counter()
    try:
        ends = _assign_since(consumer, since_ms)
        todo, deadline = set(ends), time.monotonic() + 1800
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(5)
            if msg is None or msg.error():
                continue
            key = (msg.topic(), msg.partition())
            if msg.offset() + 1 >= ends.get(key, 0):
                todo.discard(key)
            if (event_id := _ours(msg.headers(), tenants)) is not None:
                out[event_id] += 1
    finally:
        consumer.close()
    return out


def compare(in_kafka: Counter[str], in_delta: Counter[str]) -> dict[str, Any]:
    """Per event id: Kafka's records against Delta's rows (a record Kafka holds twice may rightly be two rows)."""
    lost = in_kafka.keys() - in_delta.keys()
    doubled = [i for i, n in in_delta.items() if n > in_kafka.get(i, 0) and i in in_kafka]
    return {
        "in_kafka": len(in_kafka),
        "twice_in_kafka": sum(1 for n in in_kafka.values() if n > 1),
        "in_delta": len(in_delta.keys() & in_kafka.keys()),
        "lost": len(lost),
        "lost_examples": sorted(lost)[:5],
        "more_rows_than_records": len(doubled),
        "more_rows_examples": sorted(doubled)[:5],
    }
