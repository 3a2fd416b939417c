"""What outbound had to deliver: the changes of ``metalake.changes`` since the run began, of the soak's tenants, that
the soak's subscriptions take (their filters, as the outbound runtime applies them). Read with a consumer of no group
(assigned partitions, from the offsets at the run's start time), decoded as the runtime decodes them."""

from __future__ import annotations

import time
from collections.abc import Collection

from confluent_kafka import Consumer, TopicPartition

from catalog.changes import decode_change
from control.subscriptions.filters import Filters
from metalake.kafka.config import consumer_config
from ops.settings import Settings
from soak.tenants import EVENT_TYPES
from tenants.naming import CHANGES_TOPIC


def _start_offsets(consumer: Consumer, since_ms: int) -> list[TopicPartition]:
    partitions = consumer.list_topics(CHANGES_TOPIC, timeout=30).topics[CHANGES_TOPIC].partitions
    wanted = [TopicPartition(CHANGES_TOPIC, p, since_ms) for p in partitions]
    return list(consumer.offsets_for_times(wanted, timeout=30))


def _ends(consumer: Consumer, partitions: list[TopicPartition]) -> dict[int, int]:
    return {tp.partition: consumer.get_watermark_offsets(tp, timeout=30)[1] for tp in partitions}


def expected_changes(settings: Settings, tenants: Collection[str], since_ms: int) -> dict[str, str]:
    """Change id -> tenant, for every change the soak's subscriptions take since ``since_ms``."""
    filters = Filters(event_types=EVENT_TYPES)
    wanted = set(tenants)
    consumer = Consumer({**consumer_config(settings, "soak-verify"), "enable.auto.commit": False})
    out: dict[str, str] = {}
    try:
        starts = [tp for tp in _start_offsets(consumer, since_ms) if tp.offset >= 0]
        ends = _ends(consumer, starts)
        todo = {tp.partition for tp in starts if tp.offset < ends[tp.partition]}
        consumer.assign(starts)
        deadline = time.monotonic() + 600
        while todo and time.monotonic() < deadline:
            msg = consumer.poll(5)
            if msg is None or msg.error():
                continue
            if msg.offset() + 1 >= ends[msg.partition()]:
                todo.discard(msg.partition())
            try:
                change = decode_change(msg.key(), msg.value(), msg.headers())
            except ValueError:  # what the runtime dead-letters; not the soak's tenants' (they send valid events)
                continue
            if change.tenant in wanted and filters.matches(change):
                out[change.id] = change.tenant
    finally:
        consumer.close()
    return out
