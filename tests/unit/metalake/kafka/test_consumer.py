"""BatchConsumer under rebalances: it tracks what it owns, drops records of partitions revoked in the very consume
that returned them, and survives a commit the group refuses because a rebalance fenced it out."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from metalake.kafka import consumer as consumer_module
from metalake.kafka.consumer import BatchConsumer
from metalake.telemetry.exposition import install_meter_provider, render
from ops.settings import Settings
from tests._support.scrape import sample

Callback = Callable[[Any, list[TopicPartition]], None]


class _Msg:
    def __init__(self, topic: str, partition: int, offset: int) -> None:
        self._topic, self._partition, self._offset = topic, partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset


class _FakeConsumer:
    """Scripted ``consume`` calls: each step may fire rebalance callbacks (as librdkafka does inside consume),
    then returns its messages (fetched before the callbacks, as a prefetched queue can)."""

    def __init__(self, config: dict[str, Any]) -> None:
        self.callbacks: dict[str, Callback] = {}
        self.steps: list[tuple[list[tuple[str, list[int]]], list[_Msg]]] = []
        self.commits = 0
        self.commit_error: KafkaException | None = None

    def subscribe(self, topics: list[str], **callbacks: Callback) -> None:
        self.callbacks = callbacks

    def consume(self, num_messages: int, timeout: float) -> list[_Msg]:
        events, messages = self.steps.pop(0)
        for name, partitions in events:
            self.callbacks[name](self, [TopicPartition("t", p) for p in partitions])
        return messages

    def commit(self, asynchronous: bool) -> None:
        if self.commit_error is not None:
            raise self.commit_error
        self.commits += 1

    def close(self) -> None:
        return None

    # Lag: every partition processed up to offset 10, its end offset 25.
    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [TopicPartition(tp.topic, tp.partition, 10) for tp in partitions]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool = False, timeout: float = 0) -> tuple[int, int]:
        return 0, 25


@pytest.fixture
def made(
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[tuple[BatchConsumer, _FakeConsumer, list[frozenset[tuple[str, int]]]]]:
    fakes: list[_FakeConsumer] = []

    def factory(config: dict[str, Any]) -> _FakeConsumer:
        fakes.append(_FakeConsumer(config))
        return fakes[-1]

    monkeypatch.setattr(consumer_module, "Consumer", factory)
    heard: list[frozenset[tuple[str, int]]] = []
    batch = BatchConsumer(Settings(), "g", ["t"], on_assignment=heard.append)
    yield batch, fakes[0], heard
    batch.close()  # its lag leaves the process's metrics


def test_the_listener_hears_what_is_owned_after_every_assignment_change(
    made: tuple[BatchConsumer, _FakeConsumer, list[frozenset[tuple[str, int]]]],
) -> None:
    batch, fake, heard = made
    fake.steps = [([("on_assign", [0, 1, 2])], []), ([("on_revoke", [2])], []), ([("on_lost", [1])], [])]
    for _ in range(3):
        batch.process_once(lambda b: None)
    assert heard == [
        frozenset({("t", 0), ("t", 1), ("t", 2)}),
        frozenset({("t", 0), ("t", 1)}),
        frozenset({("t", 0)}),
    ]
    assert batch.owned == frozenset({("t", 0)})


def test_records_of_a_partition_revoked_in_the_same_consume_are_dropped_not_handled(
    made: tuple[BatchConsumer, _FakeConsumer, list[frozenset[tuple[str, int]]]],
) -> None:
    batch, fake, _ = made
    fake.steps = [
        ([("on_assign", [0, 1])], [_Msg("t", 0, 5), _Msg("t", 1, 9)]),
        ([("on_revoke", [1])], [_Msg("t", 0, 6), _Msg("t", 1, 10)]),
        ([("on_revoke", [0])], [_Msg("t", 0, 7)]),
    ]
    handled: list[list[tuple[int, int]]] = []

    def handler(messages: Any) -> None:
        handled.append([(m.partition(), m.offset()) for m in messages])

    assert [batch.process_once(handler) for _ in range(3)] == [2, 1, 0]
    assert handled == [[(0, 5), (1, 9)], [(0, 6)]]
    assert fake.commits == 2  # nothing left to commit once all was revoked


@pytest.mark.parametrize(
    "code",
    [
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        # A broker restarting (bench/soak.py's Kafka restarts ended three processors here).
        KafkaError._WAIT_COORD,
        KafkaError._TRANSPORT,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.NOT_COORDINATOR,
    ],
)
def test_a_commit_refused_by_a_rebalance_or_a_coordinator_not_ready_is_not_fatal(
    made: tuple[BatchConsumer, _FakeConsumer, list[frozenset[tuple[str, int]]]], code: int
) -> None:
    batch, fake, _ = made
    fake.steps = [([("on_assign", [0])], [_Msg("t", 0, 1)])]
    fake.commit_error = KafkaException(KafkaError(code))
    assert batch.process_once(lambda b: None) == 1


def test_any_other_commit_failure_stops_the_loop(
    made: tuple[BatchConsumer, _FakeConsumer, list[frozenset[tuple[str, int]]]],
) -> None:
    batch, fake, _ = made
    fake.steps = [([("on_assign", [0])], [_Msg("t", 0, 1)])]
    fake.commit_error = KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))
    with pytest.raises(KafkaException):
        batch.process_once(lambda b: None)


def test_the_lag_of_each_owned_partition_is_exposed_once_a_batch_is_committed(
    made: tuple[BatchConsumer, _FakeConsumer, list[frozenset[tuple[str, int]]]],
) -> None:
    install_meter_provider()
    batch, fake, _ = made
    fake.steps = [([("on_assign", [0, 1])], [_Msg("t", 0, 9)])]
    assert batch.process_once(lambda messages: None) == 1
    text = render().decode()
    for partition in ("0", "1"):
        assert sample(text, "metalake_consumer_lag_records", {"group": "g", "topic": "t", "partition": partition}) == 15
    batch.close()  # a closed consumer's partitions leave the exposition
    assert sample(render().decode(), "metalake_consumer_lag_records", {"group": "g", "topic": "t"}) == 0
