"""The outbound runtime: the changes consumer, the retry consumer, and what each does with a delivery's outcome.

Main loop (consumer group ``outbound.group_id`` on ``metalake.changes``): for each record, every matching
subscription gets up to ``short_attempts`` tries; what still fails is published to the retry topic with a due time
(or to the DLQ if it can never succeed). Offsets are committed only after that: every delivery of the batch either
happened (ledger ``done``) or sits, confirmed by Kafka, in the retry topic or the DLQ. The same consumer reads
``metalake.outbound.tests``, the subscriptions' test sends (:mod:`processors.outbound.runtime.testsend`), handled in the
batch beside the changes.

Retry loop (group ``outbound.retry_group_id`` on the retry topic): a record not yet due pauses its partition and
rewinds to it until the due time; a due one is tried once for its one subscription, then committed, republished
with the next attempt and a longer delay, or dead-lettered after ``retry_topic_max_attempts``. The loops run in two
threads (a slow retry probe does not hold new changes); within a batch, records with different keys are delivered by
a pool of ``outbound.workers`` threads (one key's records in order), so one tenant's failing destination costs the
others at most its short in-process retries in one worker, each delivery bounded by ``delivery_deadline_s``.
Where the server has no TTL index (FerretDB 1.x), a thread of :mod:`processors.outbound.runtime.retention` deletes
expired ledger documents. While MongoDB cannot be reached, a batch (or a retry record) waits for it and runs again,
for up to ``mongo.outage_wait_s``: the ledger skips what it had already delivered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from confluent_kafka import Consumer, KafkaException, Message, TopicPartition

from catalog.changes import Change, InvalidChange, decode_change
from control.erased import urn_hasher
from control.subscriptions.testsend import decode_subscription_test
from metalake.events.envelope import InvalidEvent
from metalake.kafka import BatchConsumer, EventProducer, RawRecord
from metalake.kafka.config import consumer_config
from metalake.kafka.dlq import DeadLetter, dead_letter_record
from metalake.mongo import while_unreachable
from metalake.telemetry.metrics import DELIVERIES
from processors.outbound.runtime.dispatch import Dispatcher, Outcome
from processors.outbound.runtime.erasure import Candidates, forget_erased
from processors.outbound.runtime.retention import LedgerJanitor
from processors.outbound.runtime.retry import RetryInfo, RetryPolicy, read_retry_info, retry_headers
from processors.outbound.runtime.testsend import SubscriptionTester
from processors.outbound.runtime.tracing import traced_delivery
from processors.outbound.settings import OutboundProcessSettings
from tenants.naming import CHANGES_TOPIC, OUTBOUND_TESTS_TOPIC, dlq_topic, retry_topic

log = logging.getLogger(__name__)

RETRY_TOPIC = retry_topic("outbound")
DLQ_TOPIC = dlq_topic("outbound")


def _headers(msg: Message) -> list[tuple[str, bytes]]:
    raw = msg.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    return [(k, v.encode() if isinstance(v, str) else v) for k, v in pairs if v is not None]


def _subject(msg: Message) -> bytes | None:
    """The record's ``ce_subject`` (the asset), None without one."""
    for name, value in _headers(msg):
        if name == "ce_subject":
            return value
    return None


@dataclass
class Followups:
    """Retry and dead-letter records of one batch, published (and confirmed) before its offsets are committed."""

    records: list[RawRecord] = field(default_factory=list)
    retries: int = 0
    dead: int = 0


class Outbound:
    def __init__(
        self,
        settings: OutboundProcessSettings,
        dispatcher: Dispatcher,
        producer: EventProducer,
        tester: SubscriptionTester,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.settings, self.dispatcher, self.producer, self.tester = settings, dispatcher, producer, tester
        self.policy: RetryPolicy = dispatcher.policy
        self._clock = clock
        self._pool = ThreadPoolExecutor(max_workers=settings.outbound.workers, thread_name_prefix="outbound")
        # How an erased URN's hash is matched (processors.outbound.runtime.erasure): the keyed hashes of the
        # configured key-encryption keys, and the plain sha256 of records written before them.
        self.erased_candidates: Candidates = urn_hasher(settings).candidates

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    # -- outcome handling ---------------------------------------------------------------------------------------------

    def _dead(  # noqa: PLR0913
        self,
        msg: Message,
        change: Change | None,
        reason: str,
        error_class: str,
        *,
        plugin: str | None = None,
        subscription: str | None = None,
        attempts: int = 1,
    ) -> RawRecord:
        letter = DeadLetter(
            reason=reason,
            error_class=error_class,
            stage="outbound",
            tenant_id=change.tenant if change else None,
            plugin=plugin or None,
            origin_topic=msg.topic(),
            origin_partition=msg.partition(),
            origin_offset=msg.offset(),
            attempts=attempts,
            subscription=subscription,
        )
        # The retry topic's own headers describe a retry, not the change: the dead letter's context replaces them.
        original = [(k, v) for k, v in _headers(msg) if not k.startswith("outbound.")]
        record_id = change.id if change else f"{msg.topic()}:{msg.partition()}:{msg.offset()}"
        DELIVERIES.add(1, {"destination": plugin or "none", "outcome": "dead_lettered"})
        return dead_letter_record(DLQ_TOPIC, record_id, msg.key(), msg.value(), original, letter)

    def _followup(self, msg: Message, change: Change, outcome: Outcome, topic_attempt: int) -> RawRecord | None:
        """The record an outcome needs: ``None`` when delivered or skipped."""
        sub = outcome.subscription
        if outcome.status in ("delivered", "skipped"):
            return None
        if outcome.status == "retry" and not self.policy.exhausted(topic_attempt):
            delay = self.policy.topic_delay(topic_attempt, outcome.retry_after_s)
            info = RetryInfo(sub.name, topic_attempt, int((self._clock() + delay) * 1000))
            log.info(
                "outbound.retry_scheduled",
                extra={"tenant": change.tenant, "subscription": sub.name, "attempt": topic_attempt, "delay_s": delay},
            )
            return RawRecord(
                RETRY_TOPIC, change.id, msg.key(), msg.value(), retry_headers(_headers(msg), info, outcome.reason)
            )
        log.warning(
            "outbound.dead_letter",
            extra={"tenant": change.tenant, "subscription": sub.name, "reason": outcome.reason},
        )
        return self._dead(
            msg,
            change,
            outcome.reason,
            outcome.error_class or "RetriesExhausted",
            plugin=sub.destination,
            subscription=sub.name,
            attempts=topic_attempt,
        )

    def _publish(self, followups: Followups) -> None:
        if followups.records:
            self.producer.publish_raw(followups.records)

    # -- main loop ----------------------------------------------------------------------------------------------------

    def handle_batch(self, messages: Sequence[Message]) -> Followups:
        """Deliver a batch: records grouped by asset (key and subject: one asset's changes in order), groups in
        parallel. The key alone is the tenant (``metalake.changes`` is keyed by tenant): grouping by it would
        serialise a tenant's deliveries."""
        groups: dict[tuple[bytes | None, bytes | None], list[Message]] = {}
        tests: list[Message] = []
        for msg in messages:
            if msg.topic() == OUTBOUND_TESTS_TOPIC:
                tests.append(msg)
            else:
                groups.setdefault((msg.key(), _subject(msg)), []).append(msg)
        followups = Followups()
        parts = [self._pool.submit(self._handle_group, group) for group in groups.values()]
        if tests:
            parts.append(self._pool.submit(self._handle_tests, tests))
        # Every group ends before the batch does: a batch run again (MongoDB back) or redelivered never overlaps a
        # group still delivering. result() then re-raises a worker's exception: the batch fails as a whole.
        wait(parts)
        for part in parts:
            done = part.result()
            followups.records += done.records
            followups.retries += done.retries
            followups.dead += done.dead
        self._publish(followups)
        return followups

    def _handle_group(self, messages: Sequence[Message]) -> Followups:
        followups = Followups()
        for msg in messages:
            try:
                change = decode_change(msg.key(), msg.value(), _headers(msg))
            except InvalidChange as exc:
                followups.records.append(self._dead(msg, None, exc.reason, type(exc).__name__))
                followups.dead += 1
                continue
            # An erased asset: the ledger forgets its URN before subscribers hear of the erase.
            forget_erased(self.dispatcher.ledger, change, self.erased_candidates)
            headers = _headers(msg)
            for sub in self.dispatcher.targets(change):
                deliver = partial(self.dispatcher.deliver, change, sub, self.policy.short_attempts)
                outcome = traced_delivery(deliver, headers, change, sub, 1)
                record = self._followup(msg, change, outcome, 1)
                if record is not None:
                    followups.records.append(record)
                    followups.retries += record[0] == RETRY_TOPIC
                    followups.dead += record[0] == DLQ_TOPIC
        return followups

    def _handle_tests(self, messages: Sequence[Message]) -> Followups:
        followups = Followups()
        for msg in messages:
            try:
                test = decode_subscription_test(msg.key(), msg.value(), _headers(msg))
            except InvalidEvent as exc:
                followups.records.append(self._dead(msg, None, exc.reason, type(exc).__name__))
                followups.dead += 1
                continue
            self.tester.handle(test)
        return followups

    # -- retry loop ---------------------------------------------------------------------------------------------------

    def handle_retry(self, msg: Message) -> None:
        """Try a due retry record's one subscription once; publish what follows. The caller commits after."""
        info = read_retry_info(_headers(msg))
        try:
            change = decode_change(msg.key(), msg.value(), _headers(msg))
        except InvalidChange as exc:
            self._publish(Followups([self._dead(msg, None, exc.reason, type(exc).__name__)]))
            return
        if info is None:
            self._publish(Followups([self._dead(msg, change, "retry record without outbound headers", "BadRetry")]))
            return
        sub = self.dispatcher.subscriptions.get(change.tenant, info.subscription)
        if sub is None:
            # Deleted or disabled since: nothing to deliver to, and nothing worth keeping.
            log.info("outbound.retry_dropped", extra={"tenant": change.tenant, "subscription": info.subscription})
            return
        deliver = partial(self.dispatcher.deliver, change, sub, 1, probe=True)
        outcome = traced_delivery(deliver, _headers(msg), change, sub, info.attempt + 1)
        record = self._followup(msg, change, outcome, info.attempt + 1)
        if record is not None:
            self._publish(Followups([record]))


class RetryConsumer:
    """Consumes the retry topic honouring due times: pause + seek back until a record is due."""

    def __init__(
        self, settings: OutboundProcessSettings, outbound: Outbound, clock: Callable[[], float] = time.time
    ) -> None:
        self._consumer = Consumer(
            consumer_config(
                settings,
                settings.outbound.retry_group_id,
                **{"session.timeout.ms": settings.outbound.session_timeout_ms},
            )
        )
        self._consumer.subscribe([RETRY_TOPIC], on_revoke=self._on_revoke)
        self._outbound, self._clock = outbound, clock
        self._outage_wait_s = settings.mongo.outage_wait_s
        self._paused: dict[tuple[str, int], float] = {}

    def _on_revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._paused.pop((tp.topic, tp.partition), None)

    def _resume_due(self) -> None:
        now = self._clock()
        due = [tp for tp, when in self._paused.items() if when <= now]
        if due:
            self._consumer.resume([TopicPartition(t, p) for t, p in due])
            for tp in due:
                del self._paused[tp]

    def step(self, max_records: int, timeout_s: float) -> int:
        self._resume_due()
        handled = 0
        for msg in self._consumer.consume(num_messages=max_records, timeout=timeout_s):
            err = msg.error()
            if err is not None:
                if err.fatal():
                    raise KafkaException(err)
                continue
            topic, partition = msg.topic() or RETRY_TOPIC, msg.partition() or 0
            if (topic, partition) in self._paused:
                continue  # rewound: it comes again after the resume
            info = read_retry_info(_headers(msg))
            due_s = info.due_ms / 1000 if info else 0.0
            if due_s > self._clock():
                tp = TopicPartition(topic, partition, msg.offset() or 0)
                self._consumer.pause([tp])
                self._consumer.seek(tp)
                self._paused[(topic, partition)] = due_s
                continue
            # MongoDB away: the record waits for it, as the main loop's batch does.
            while_unreachable(partial(self._outbound.handle_retry, msg), self._outage_wait_s, "outbound.retry")
            self._consumer.commit(
                offsets=[TopicPartition(topic, partition, (msg.offset() or 0) + 1)], asynchronous=False
            )
            handled += 1
        return handled

    def close(self) -> None:
        self._consumer.close()


class Loops:
    """The main loop (this thread) and the retry loop (its own thread) until ``stopping`` is set.

    Apart so that a retry probe of a slow destination (up to ``delivery_deadline_s`` each, one per breaker cool-down)
    holds only the retry loop, never the batches of every tenant's new changes. An error in either stops both and is
    raised here."""

    def __init__(self, settings: OutboundProcessSettings, outbound: Outbound) -> None:
        self.settings, self.outbound = settings, outbound
        session: dict[str, Any] = {"session.timeout.ms": settings.outbound.session_timeout_ms}
        self.main = BatchConsumer(
            settings, settings.outbound.group_id, [CHANGES_TOPIC, OUTBOUND_TESTS_TOPIC], **session
        )
        self.retry = RetryConsumer(settings, outbound)
        self.janitor = LedgerJanitor(outbound.dispatcher.ledger, settings.outbound.ledger_prune_interval_s)
        self.stopping = False
        self._retry_failed: BaseException | None = None

    def _handle(self, messages: Sequence[Message]) -> None:
        # MongoDB away (a restart, a failover): the batch waits for it and runs again instead of stopping the
        # process. What it delivered before is done in the ledger (skipped), and its follow-ups are published only
        # once the whole batch has run.
        wait_s = self.settings.mongo.outage_wait_s
        while_unreachable(lambda: self.outbound.handle_batch(messages), wait_s, "outbound.batch")

    def _retry_loop(self) -> None:
        cfg = self.settings.outbound
        try:
            while not self.stopping:
                self.retry.step(cfg.batch_size, min(cfg.poll_timeout_s, 0.2))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, which stops the process with it
            self._retry_failed = exc
            self.stopping = True

    def run(self) -> None:
        log.info("outbound.started", extra={"group": self.settings.outbound.group_id})
        cfg = self.settings.outbound
        retry = threading.Thread(target=self._retry_loop, name="outbound-retry")
        try:
            self.janitor.start()
            retry.start()
            while not self.stopping:
                self.main.process_once(self._handle, cfg.batch_size, cfg.poll_timeout_s)
            if self._retry_failed is not None:
                raise self._retry_failed
        finally:
            self.stopping = True
            if retry.is_alive():
                retry.join()
            self.janitor.stop()
            self.main.close()
            self.retry.close()
            self.outbound.close()
            log.info("outbound.stopped")
