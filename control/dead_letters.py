"""A tenant's dead letters in the shared DLQ topics (``metalake.connectors.dlq``, ``metalake.outbound.dlq``).

A letter is named by where it sits: ``<medium>-<partition>-<offset>`` (``connectors-0-42``), stable for the record's
life in the topic. The topics are shared by tenants and carry the tenant in the ``tenant_id`` context header: every
read filters on it, so a letter of another tenant is "not found", never shown. A listing reads each partition from
its newest records back, at most ``dead_letters.scan_max_records`` per topic (split over the partitions) and within
``dead_letters.read_timeout_s``; older letters are left out and the listing says so (``truncated``).

What a person sees of a letter is :mod:`control.dead_letter_view`'s decision; replays are
:mod:`control.dead_letter_replay`'s. They are in the control layer because the admin API lists and replays (it holds
the tenant check, the audit and the publisher) while the stages that refused the records are other deployables. See
docs/dead-letters.md.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from metalake.kafka.config import consumer_config
from metalake.kafka.dlq import CONTEXT_HEADERS, DeadLetter, read_dead_letter
from metalake.settings import Settings
from tenants.naming import dlq_topic

Medium = Literal["connectors", "outbound"]
MEDIA: tuple[Medium, ...] = ("connectors", "outbound")
LETTER_ID = re.compile(r"(connectors|outbound)-(\d{1,6})-(\d{1,19})")
# The reader never commits: the group only satisfies the client (offsets are assigned, not subscribed).
_GROUP = "metalake.deadletters.reader"
# librdkafka's "reached the end of the partition" event (enable.partition.eof), a private name in the binding.
_EOF = getattr(KafkaError, "_PARTITION_EOF", -191)


class DeadLettersUnavailable(RuntimeError):
    """Kafka did not answer within the read timeout (or refused the read): the caller answers 503."""


@dataclass(frozen=True)
class StoredLetter:
    """One record of a DLQ topic that is a dead letter: its place, time, original bytes and context."""

    medium: Medium
    partition: int
    offset: int
    time: datetime
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    letter: DeadLetter

    @property
    def id(self) -> str:
        return letter_id(self.medium, self.partition, self.offset)

    @property
    def original_headers(self) -> list[tuple[str, bytes]]:
        """The headers the record had before it was dead-lettered (the context headers taken off)."""
        return [(k, v) for k, v in self.headers if k not in CONTEXT_HEADERS]


@dataclass(frozen=True)
class Scan:
    """The tenant's letters of one read, newest first; ``truncated`` when older records were not read."""

    letters: list[StoredLetter]
    truncated: bool


def letter_id(medium: Medium, partition: int, offset: int) -> str:
    return f"{medium}-{partition}-{offset}"


def parse_letter_id(text: str) -> tuple[Medium, int, int] | None:
    match = LETTER_ID.fullmatch(text)
    if match is None:
        return None
    medium: Medium = "connectors" if match.group(1) == "connectors" else "outbound"
    return medium, int(match.group(2)), int(match.group(3))


def _headers(msg: Message) -> tuple[tuple[str, bytes], ...]:
    raw = msg.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs if v is not None)


def _stored(medium: Medium, msg: Message, tenant: str) -> StoredLetter | None:
    headers = _headers(msg)
    letter = read_dead_letter(headers)
    if letter is None or letter.tenant_id != tenant:
        return None
    millis = int(msg.timestamp()[1])
    partition, offset = msg.partition(), msg.offset()
    if partition is None or offset is None:
        return None
    return StoredLetter(
        medium,
        partition,
        offset,
        datetime.fromtimestamp(max(millis, 0) / 1000, UTC),
        msg.key(),
        msg.value(),
        headers,
        letter,
    )


class DeadLetterTopics:
    """Reads the DLQ topics with a short-lived consumer per call (listings are rare: a person asks)."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._limits = settings.dead_letters

    def _consumer(self) -> Consumer:
        # Uncommitted reads too: a DLQ record is published without a transaction.
        return Consumer(
            consumer_config(
                self._settings, _GROUP, **{"enable.partition.eof": True, "isolation.level": "read_uncommitted"}
            )
        )

    def _partitions(self, consumer: Consumer, topic: str, deadline: float) -> list[int]:
        metadata = consumer.list_topics(topic, timeout=max(deadline - time.monotonic(), 0.1))
        found = metadata.topics.get(topic)
        if found is None or found.error is not None:
            # No DLQ topic yet (nothing was ever dead-lettered): no letters, not an outage.
            if found is not None and found.error.code() != KafkaError.UNKNOWN_TOPIC_OR_PART:
                raise DeadLettersUnavailable(f"{topic}: {found.error.name()}")
            return []
        return sorted(found.partitions)

    def scan(self, tenant: str, media: Sequence[Medium] = MEDIA) -> Scan:
        """The tenant's letters in ``media``, newest first."""
        letters: list[StoredLetter] = []
        truncated = False
        for medium in media:
            found, cut = self._scan_topic(tenant, medium)
            letters += found
            truncated = truncated or cut
        letters.sort(key=lambda s: (s.time, s.medium, s.partition, s.offset), reverse=True)
        return Scan(letters, truncated)

    def _scan_topic(self, tenant: str, medium: Medium) -> tuple[list[StoredLetter], bool]:
        topic = dlq_topic(medium)
        deadline = time.monotonic() + self._limits.read_timeout_s
        consumer = self._consumer()
        try:
            partitions = self._partitions(consumer, topic, deadline)
            if not partitions:
                return [], False
            per_partition = max(1, self._limits.scan_max_records // len(partitions))
            starts: list[TopicPartition] = []
            ends: dict[int, int] = {}
            truncated = False
            for p in partitions:
                low, high = consumer.get_watermark_offsets(
                    TopicPartition(topic, p), timeout=max(deadline - time.monotonic(), 0.1)
                )
                if high <= low:
                    continue
                start = max(low, high - per_partition)
                truncated = truncated or start > low
                starts.append(TopicPartition(topic, p, start))
                ends[p] = high
            return list(self._read(consumer, tenant, medium, starts, ends, deadline)), truncated
        except KafkaException as exc:
            raise DeadLettersUnavailable(f"{topic}: {exc.args[0].name() if exc.args else 'error'}") from None
        finally:
            consumer.close()

    def _read(
        self,
        consumer: Consumer,
        tenant: str,
        medium: Medium,
        starts: list[TopicPartition],
        ends: dict[int, int],
        deadline: float,
    ) -> Iterator[StoredLetter]:
        if not starts:
            return
        consumer.assign(starts)
        pending = set(ends)
        while pending:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise DeadLettersUnavailable(f"{dlq_topic(medium)}: not read within the timeout")
            for msg in consumer.consume(num_messages=500, timeout=min(remaining, 1.0)):
                partition, offset = msg.partition(), msg.offset()
                error = msg.error()
                if error is not None:
                    if error.code() == _EOF:
                        pending.discard(partition if partition is not None else -1)
                        continue
                    raise DeadLettersUnavailable(f"{dlq_topic(medium)}: {error.name()}")
                if partition is None or offset is None:
                    continue
                if offset >= ends.get(partition, 0) - 1:
                    pending.discard(partition)
                stored = _stored(medium, msg, tenant)
                if stored is not None:
                    yield stored

    def get(self, tenant: str, medium: Medium, partition: int, offset: int) -> StoredLetter | None:
        """The letter at that place if it is one of the tenant's, else ``None`` (another tenant's letters too)."""
        topic = dlq_topic(medium)
        deadline = time.monotonic() + self._limits.read_timeout_s
        consumer = self._consumer()
        try:
            if partition not in self._partitions(consumer, topic, deadline):
                return None
            low, high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=max(deadline - time.monotonic(), 0.1)
            )
            if not low <= offset < high:
                return None
            consumer.assign([TopicPartition(topic, partition, offset)])
            while (remaining := deadline - time.monotonic()) > 0:
                msg = consumer.poll(min(remaining, 1.0))
                if msg is None:
                    continue
                error = msg.error()
                if error is not None:
                    if error.code() == _EOF:
                        return None
                    raise DeadLettersUnavailable(f"{topic}: {error.name()}")
                # A compacted or transactional topic may skip the offset: the next record is not the one asked for.
                return _stored(medium, msg, tenant) if msg.offset() == offset else None
            raise DeadLettersUnavailable(f"{topic}: not read within the timeout")
        except KafkaException as exc:
            raise DeadLettersUnavailable(f"{topic}: {exc.args[0].name() if exc.args else 'error'}") from None
        finally:
            consumer.close()
