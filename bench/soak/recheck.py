"""``bench/soak.py --recheck``: Delta's history checked again, later, against Kafka itself. When the run's drain timed
out (the lake query still behind), the check at the end cannot tell a lost event from one still waiting in Kafka;
this one can: it reads what the ingest API put in the pooled event topics (an accepted request is durable there) for
the run's tenants since the run began, with each record's offset, and the offsets up to which the pooled lake query
has committed (its checkpoint's last committed batch). A record below them whose event id is not in Delta's
``events`` is lost; one above them is still pending."""

from __future__ import annotations

import json
import time
from collections import Counter
from collections.abc import Collection
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, TopicPartition

from metalake.kafka.config import consumer_config
from ops.settings import Settings
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


Record = tuple[str, int, int]  # topic, partition, offset


def kafka_ids(settings: Settings, tenants: Collection[str], since_ms: int) -> dict[str, list[Record]]:
    """Event id -> its records in the event topics, for the bench's events of ``tenants`` since ``since_ms``."""
    consumer = Consumer({**consumer_config(settings, "soak-recheck"), "enable.auto.commit": False})
    out: dict[str, list[Record]] = {}
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
                out.setdefault(event_id, []).append((msg.topic(), msg.partition(), msg.offset()))
    finally:
        consumer.close()
    return out


def committed(checkpoint: Path) -> dict[tuple[str, int], int]:
    """The end offsets (exclusive) of the query's last committed batch: every record below is in Delta."""
    last = max(int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit())
    sources = json.loads((checkpoint / "offsets" / str(last)).read_text().splitlines()[2])
    return {(topic, int(p)): int(end) for topic, parts in sources.items() for p, end in parts.items()}


def compare(
    in_kafka: dict[str, list[Record]], in_delta: Counter[str], done: dict[tuple[str, int], int]
) -> dict[str, Any]:
    """Per event id: its Kafka records against Delta's rows (a record Kafka holds twice may rightly be two rows); an
    id with a record below the committed offsets must be in Delta, the others may still be pending."""
    processed = {i for i, recs in in_kafka.items() if any(o < done.get((t, p), 0) for t, p, o in recs)}
    missing = in_kafka.keys() - in_delta.keys()
    doubled = [i for i, n in in_delta.items() if i in in_kafka and n > len(in_kafka[i])]
    return {
        "in_kafka": len(in_kafka),
        "twice_in_kafka": sum(1 for recs in in_kafka.values() if len(recs) > 1),
        "committed_by_the_lake_query": len(processed),
        "in_delta": len(in_delta.keys() & in_kafka.keys()),
        "lost": len(missing & processed),
        "lost_examples": sorted(missing & processed)[:5],
        "pending": len(missing - processed),
        "more_rows_than_records": len(doubled),
        "more_rows_examples": sorted(doubled)[:5],
    }
