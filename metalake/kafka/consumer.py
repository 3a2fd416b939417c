"""A consumer that commits offsets only after the caller's side effects for a batch are durable."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from metalake.http.health import LOOP
from metalake.settings import Settings

log = logging.getLogger(__name__)

BatchHandler = Callable[[Sequence[Message]], None]
# Told the (topic, partition) pairs this instance owns after every change of its assignment.
AssignmentListener = Callable[[frozenset[tuple[str, int]]], None]
# A commit the group refused because it moved on (this member was fenced out by a rebalance): the batch's side
# effects are done and idempotent, the partitions' new owner replays it.
_LOST_TO_REBALANCE = frozenset(
    {KafkaError.REBALANCE_IN_PROGRESS, KafkaError.ILLEGAL_GENERATION, KafkaError.UNKNOWN_MEMBER_ID}
)


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

    Several instances in one group share the partitions. Rebalances are served inside ``consume`` only, after the
    previous batch was committed: a revocation finds nothing done and uncommitted. Records of a partition revoked
    during that ``consume`` are dropped (their new owner reads them from the committed offset), and a commit the
    group refuses because a rebalance fenced this member out is logged, not fatal (the new owner replays the batch
    into the same idempotent stores). ``on_assignment`` hears the partitions owned after every change.
    """

    def __init__(
        self,
        settings: Settings,
        group_id: str,
        topics: Sequence[str],
        *,
        on_assignment: AssignmentListener | None = None,
        **overrides: Any,
    ) -> None:
        from metalake.kafka.config import consumer_config

        self._consumer = Consumer(consumer_config(settings, group_id, **overrides))
        self._group = group_id
        self._owned: set[tuple[str, int]] = set()
        self._listener = on_assignment
        self._consumer.subscribe(list(topics), on_assign=self._assigned, on_revoke=self._revoked, on_lost=self._revoked)

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
            return 0
        handler(batch)
        try:
            self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            error = exc.args[0] if exc.args and isinstance(exc.args[0], KafkaError) else None
            if error is None or error.code() not in _LOST_TO_REBALANCE:
                raise
            log.warning("kafka.commit_lost_to_rebalance", extra={"group": self._group, "error": error.name()})
        return len(batch)

    def close(self) -> None:
        self._consumer.close()
