"""The Kafka helpers on the real broker: confirmed delivery, and offsets committed only after the handler succeeds."""

from __future__ import annotations

import secrets
from collections.abc import Sequence

import pytest
from confluent_kafka import Message

from metalake.events import new_event
from metalake.kafka import BatchConsumer, EventProducer, PublishError, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager

pytestmark = pytest.mark.integration


def _events(n: int) -> list:  # type: ignore[type-arg]
    return [
        new_event(
            "io.metalake.asset.upserted.v1",
            "kafka-io",
            {"urn": asset_urn("pg", "x", "db", f"t{i}"), "version": i, "kind": "schema", "name": f"t{i}"},
            source="/tests/kafka",
        )
        for i in range(n)
    ]


def _drain(consumer: BatchConsumer, handler: object, rounds: int = 20) -> int:
    total = 0
    for _ in range(rounds):
        total += consumer.process_once(handler, max_records=100, timeout_s=0.5)  # type: ignore[arg-type]
    return total


def test_offsets_are_committed_only_after_the_handler_returns(settings: Settings, stack: StackManager) -> None:
    topic = f"it.kafka-io.{secrets.token_hex(4)}"
    assert ensure_topics(settings, [topic], partitions=1) == [topic]
    assert ensure_topics(settings, [topic], partitions=1) == []  # idempotent
    events = _events(5)
    with EventProducer(settings) as producer:
        deliveries = producer.publish(events, lambda e: topic)
    assert [d.offset for d in deliveries] == [0, 1, 2, 3, 4]
    assert [d.event_id for d in deliveries] == [e.id for e in events]

    group = f"it-{secrets.token_hex(4)}"

    def failing(batch: Sequence[Message]) -> None:
        raise RuntimeError("side effect failed")

    first = BatchConsumer(settings, group, [topic])
    with pytest.raises(RuntimeError, match="side effect failed"):
        _drain(first, failing)
    first.close()

    seen: list[str] = []

    def recording(batch: Sequence[Message]) -> None:
        seen.extend(dict(m.headers() or [])["ce_id"].decode() for m in batch)

    second = BatchConsumer(settings, group, [topic])
    assert _drain(second, recording) == 5  # nothing was committed by the failed attempt
    second.close()
    assert seen == [e.id for e in events]

    third = BatchConsumer(settings, group, [topic])
    assert _drain(third, recording, rounds=4) == 0  # everything was committed after the successful handler
    third.close()


def test_publishing_to_a_missing_topic_fails_loudly(settings: Settings, stack: StackManager) -> None:
    # Auto-creation is off: a typo in a topic name must not silently create a topic.
    with EventProducer(settings, **{"delivery.timeout.ms": 3000}) as producer:
        with pytest.raises(PublishError) as err:
            producer.publish(_events(1), lambda e: f"it.missing.{secrets.token_hex(4)}")
    assert "not confirmed" in str(err.value) or "rejected" in str(err.value)
