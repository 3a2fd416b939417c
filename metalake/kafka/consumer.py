"""A consumer that commits offsets only after the caller's side effects for a batch are durable."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from metalake.http.health import LOOP
from metalake.settings import KernelSettings
from metalake.telemetry.metrics import CONSUMER_LAG

log = logging.getLogger(__name__)

BatchHandler = Callable[[Sequence[Message]], None]
# Told the (topic, partition) pairs this instance owns after every change of its assignment.
AssignmentListener = Callable[[frozenset[tuple[str, int]]], None]
# A commit the group refused because it moved on (this member was fenced out by a rebalance): the batch's side
# effects are done and idempotent, the partitions' new owner replays it.
_LOST_TO_REBALANCE = frozenset(
    {KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID}
)
# A commit the group coordinator could not take yet: a broker restarting or its coordinator moving (the soak's Kafka
# restarts ended access, propagation and outbound here). The batch's side effects are durable and idempotent, so the
# next batch's commit covers its offsets; a crash before it only replays the batch.
_COORDINATOR_BUSY = frozenset(
    {
        KafkaError._WAIT_COORD,  # noqa: SLF001 - librdkafka names its local errors with a leading underscore
        KafkaError._TRANSPORT,  # noqa: SLF001
        KafkaError._TIMED_OUT,  # noqa: SLF001
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.NOT_COORDINATOR,
        KafkaError.REQUEST_TIMED_OUT,
    }
)
#: How often the poll loop refreshes its lag (metalake_consumer_lag_records), between two batches.
LAG_EVERY_S = 5.0
_BROKER_TIMEOUT_S = 1.0


class Received(Protocol):
    """The slice of a consumed Kafka message that processors read (confluent_kafka's ``Message`` has it; tests pass
    small fakes)."""

    def key(self) -> bytes | None: ...
    def headers(self) -> Any: ...  # list of (name, bytes) pairs; the stub's union also admits str and dict  # noqa: ANN401
    def value(self) -> bytes | None: ...
    def partition(self) -> int | None: ...
    def offset(self) -> int | None: ...


class BatchConsumer:
    """Polls batches and hands them to a handler; commits synchronously after the handler returns.

    If the handler raises, nothing is committed and the exception propagates: the process should stop, and a
    restart re-delivers the batch (at-least-once into idempotent stores).

    Several instances in one group share the partitions. Rebalances are served inside ``consume`` only, after the
    previous batch was committed: a revocation finds nothing done and uncommitted. Records of a partition revoked
    during that ``consume`` are dropped (their new owner reads them from the committed offset), and a commit the
    group refuses because a rebalance fenced this member out is logged, not fatal (the new owner replays the batch
    into the same idempotent stores). ``on_assignment`` hears the partitions owned after every change.
    """

    def __init__(
        self,
        settings: KernelSettings,
        group_id: str,
        topics: Sequence[str],
        *,
        on_assignment: AssignmentListener | None = None,
        **overrides: Any,  # noqa: ANN401
    ) -> None:
        from metalake.kafka.config import consumer_config

        self._consumer = Consumer(consumer_config(settings, group_id, **overrides))
        self._group = group_id
        self._owned: set[tuple[str, int]] = set()
        self._listener = on_assignment
        self._consumer.subscribe(list(topics), on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)
        # Lag per owned partition, refreshed by the loop's own thread (the client's calls stay on it) and read by the
        # metrics at scrape time.
        self._lag: dict[tuple[str, int], int] = {}
        self._lag_at = 0.0
        self._unwatch = CONSUMER_LAG.watch(self._lag_readings)

    @property
    def owned(self) -> frozenset[tuple[str, int]]:
        return frozenset(self._owned)

    def _assigned(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        # Eager protocols (librdkafka's default) hand the whole assignment, cooperative ones the increment: both add.
        self._owned |= {(tp.topic, tp.partition) for tp in partitions}
        self._changed("kafka.partitions_assigned", partitions)

    def _revoked(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        self._owned -= {(tp.topic, tp.partition) for tp in partitions}
        self._changed("kafka.partitions_revoked", partitions)

    def _changed(self, what: str, partitions: list[TopicPartition]) -> None:
        log.info(
            what,
            extra={
                "group": self._group,
                "partitions": sorted(f"{tp.topic}/{tp.partition}" for tp in partitions),
                "owned": len(self._owned),
            },
        )
        if self._listener is not None:
            self._listener(frozenset(self._owned))

    def poll_batch(self, max_records: int = 500, timeout_s: float = 1.0) -> list[Message]:
        messages = self._consumer.consume(num_messages=max_records, timeout=timeout_s)
        LOOP.beat()  # the health server's liveness: this process's loop still polls
        good: list[Message] = []
        for msg in messages:
            err = msg.error()
            if err is None:
                if (msg.topic() or "", msg.partition() or 0) in self._owned:
                    good.append(msg)  # else fetched before its partition was revoked in this very consume
            elif err.fatal():
                raise KafkaException(err)
            else:
                log.warning("kafka.consume_error", extra={"error": err.str()})
        return good

    def process_once(self, handler: BatchHandler, max_records: int = 500, timeout_s: float = 1.0) -> int:
        batch = self.poll_batch(max_records, timeout_s)
        if not batch:
            self._refresh_lag()
            return 0
        handler(batch)
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() not in _LOST_TO_REBALANCE | _COORDINATOR_BUSY:
                raise
            log.warning("kafka.commit_deferred", extra={"group": self._group, "error": error.name()})
        self._refresh_lag()
        return len(batch)

    def _refresh_lag(self) -> None:
        """End offset minus this member's processed position per owned partition, at most every ``LAG_EVERY_S``.

        Called only once a batch is committed (or none came), so the position is the committed offset. Both come
        from the client when it has them (positions, and high watermarks cached from fetch responses): no broker
        round trip; a partition not fetched or consumed yet since its assignment asks the broker once."""
        now = time.monotonic()
        if now - self._lag_at < LAG_EVERY_S:
            return
        self._lag_at = now
        try:
            owned = [TopicPartition(t, p) for t, p in sorted(self._owned)]
            done = _positions(self._consumer, owned)
            self._lag = {key: max(0, _end_offset(self._consumer, *key) - offset) for key, offset in done.items()}
        except Exception as exc:  # noqa: BLE001 - a metric never stops the loop
            log.warning("kafka.lag_unavailable", extra={"group": self._group, "error": type(exc).__name__})

    def _lag_readings(self) -> Iterable[tuple[float, Mapping[str, str]]]:
        owned, lag = self._owned, self._lag
        return [
            (float(n), {"group": self._group, "topic": t, "partition": str(p)})
            for (t, p), n in lag.items()
            if (t, p) in owned
        ]

    def close(self) -> None:
        self._unwatch()
        self._consumer.close()


def _positions(consumer: Consumer, partitions: list[TopicPartition]) -> dict[tuple[str, int], int]:
    """The processed position of each partition: the client's, else the group's committed offset (a broker call, for
    partitions nothing was consumed from since they were assigned)."""
    out: dict[tuple[str, int], int] = {}
    unknown = []
    for tp in consumer.position(partitions) if partitions else []:
        if tp.offset >= 0:
            out[(tp.topic, tp.partition)] = tp.offset
        else:
            unknown.append(TopicPartition(tp.topic, tp.partition))
    if unknown:
        for tp in consumer.committed(unknown, timeout=_BROKER_TIMEOUT_S):
            if tp.offset >= 0:
                out[(tp.topic, tp.partition)] = tp.offset
    return out


def _end_offset(consumer: Consumer, topic: str, partition: int) -> int:
    _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), cached=True)
    if high < 0:  # not fetched yet: ask the broker
        _, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=_BROKER_TIMEOUT_S)
    return int(high)
