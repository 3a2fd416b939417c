"""A tenant's dead letters: in the shared DLQ topics (``metalake.connectors.dlq``, ``metalake.outbound.dlq``) and in
the streaming job's ``_dlq`` Delta table (:class:`StreamDeadLetters`).

A letter is named by where it sits: ``<medium>-<partition>-<offset>`` (``connectors-0-42``), stable for the record's
life in the topic; a ``_dlq`` row by the record it keeps, ``stream-<priority|bulk>-<partition>-<offset>`` of the
tenant's event topic. The topics are shared by tenants and carry the tenant in the ``tenant_id`` context header: every
read filters on it, so a letter of another tenant is "not found", never shown. A listing reads each partition from
its newest records back, at most ``dead_letters.scan_max_records`` per topic (split over the partitions) and within
``dead_letters.read_timeout_s``; older letters are left out and the listing says so (``truncated``).

What a person sees of a letter is :mod:`api.services.dead_letters.view`'s decision; replays are
:mod:`api.services.dead_letters.replay`'s. They are the admin API's because it alone lists and replays (it holds the
tenant check, the audit and the publisher); the stages that refused the records are other deployables. See
docs/dead-letters.md.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition
from deltalake import DeltaTable, QueryBuilder

from api.settings import AdminApiSettings
from metalake.kafka.config import consumer_config
from metalake.kafka.dlq import CONTEXT_HEADERS, DeadLetter, read_dead_letter
from metalake.lake_uri import delta_rs_uri
from metalake.s3 import lake_storage_options
from tenants.naming import TenantNames, TopicClass, dlq_topic

Medium = Literal["connectors", "outbound", "stream"]
TopicMedium = Literal["connectors", "outbound"]
MEDIA: tuple[TopicMedium, ...] = ("connectors", "outbound")
LETTER_ID = re.compile(r"(connectors|outbound)-(\d{1,6})-(\d{1,19})")
STREAM_LETTER_ID = re.compile(r"stream-(priority|bulk)-(\d{1,6})-(\d{1,19})")
# The reader never commits: the group only satisfies the client (offsets are assigned, not subscribed).
READER_GROUP = "metalake.deadletters.reader"
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

    # The topic class of a stream letter's record (``stream-<class>-...``); None for a DLQ topic's letter.
    topic_class: TopicClass | None = None

    @property
    def id(self) -> str:
        if self.medium == "stream":
            return f"stream-{self.topic_class}-{self.partition}-{self.offset}"
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


def letter_id(medium: TopicMedium, partition: int, offset: int) -> str:
    return f"{medium}-{partition}-{offset}"


def parse_letter_id(text: str) -> tuple[TopicMedium, int, int] | None:
    """A DLQ topic letter's place; None for anything else (a stream letter too: :func:`parse_stream_letter_id`)."""
    match = LETTER_ID.fullmatch(text)
    if match is None:
        return None
    medium: TopicMedium = "connectors" if match.group(1) == "connectors" else "outbound"
    return medium, int(match.group(2)), int(match.group(3))


def parse_stream_letter_id(text: str) -> tuple[TopicClass, int, int] | None:
    match = STREAM_LETTER_ID.fullmatch(text)
    if match is None:
        return None
    topic_class: TopicClass = "priority" if match.group(1) == "priority" else "bulk"
    return topic_class, int(match.group(2)), int(match.group(3))


def _headers(msg: Message) -> tuple[tuple[str, bytes], ...]:
    raw = msg.headers() or []
    pairs = list(raw.items()) if isinstance(raw, dict) else raw
    return tuple((k, v.encode() if isinstance(v, str) else v) for k, v in pairs if v is not None)


def _stored(medium: TopicMedium, msg: Message, tenant: str) -> StoredLetter | None:
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

    def __init__(self, settings: AdminApiSettings) -> None:
        self._settings = settings
        self._limits = settings.dead_letters

    def _consumer(self) -> Consumer:
        # Uncommitted reads too: a DLQ record is published without a transaction.
        return Consumer(
            consumer_config(
                self._settings, READER_GROUP, **{"enable.partition.eof": True, "isolation.level": "read_uncommitted"}
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

    def scan(self, tenant: str, media: Sequence[TopicMedium] = MEDIA) -> Scan:
        """The tenant's letters in ``media``, newest first."""
        letters: list[StoredLetter] = []
        truncated = False
        for medium in media:
            found, cut = self._scan_topic(tenant, medium)
            letters += found
            truncated = truncated or cut
        letters.sort(key=lambda s: (s.time, s.medium, s.partition, s.offset), reverse=True)
        return Scan(letters, truncated)

    def _scan_topic(self, tenant: str, medium: TopicMedium) -> tuple[list[StoredLetter], bool]:
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
        medium: TopicMedium,
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

    def get(self, tenant: str, medium: TopicMedium, partition: int, offset: int) -> StoredLetter | None:
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


# -- the streaming job's _dlq table ------------------------------------------------------------------------------------

_DLQ_COLUMNS = (
    "reason",
    "field",
    "raw_key",
    "raw_value",
    "raw_headers",
    "kafka_topic",
    "kafka_partition",
    "kafka_offset",
    "ingested_at",
)


def _raw_headers(text: str | None) -> tuple[tuple[str, bytes], ...]:
    # The job keeps the headers as a JSON object of UTF-8 text (invalid bytes replaced): re-encoded as such.
    try:
        decoded = json.loads(text or "{}")
    except ValueError:
        return ()
    if not isinstance(decoded, dict):
        return ()
    return tuple((str(k), str(v).encode()) for k, v in decoded.items() if v is not None)


class StreamDeadLetters:
    """A tenant's rows of the streaming job's ``_dlq`` Delta table (its own table if dedicated, else its rows of the
    pooled one, filtered on its bucket and id), read with delta-rs, newest first, at most
    ``dead_letters.scan_max_records`` per read. Only rows of the tenant's own event topics are letters here: those
    are the records a replay can send back to the job."""

    def __init__(self, settings: AdminApiSettings, names: TenantNames) -> None:
        self._settings, self._names = settings, names

    def _query(self, where: str, limit: int) -> list[StoredLetter]:
        table = self._names.table("_dlq")
        options = lake_storage_options(self._settings)
        uri = delta_rs_uri(table.path)
        if not DeltaTable.is_deltatable(uri, storage_options=options):
            return []
        topics = {self._names.topic("priority"): "priority", self._names.topic("bulk"): "bulk"}
        clauses = [where, "kafka_topic IN (" + ", ".join(f"'{t}'" for t in topics) + ")"]
        if table.tenant_id is not None:
            # Validated tenant ids and our own topic names only: delta-rs' SQL takes no parameters.
            clauses += [f"tenant_bucket = {int(table.bucket or 0)}", f"tenant_id = '{table.tenant_id}'"]
        sql = (
            f"SELECT {', '.join(_DLQ_COLUMNS)} FROM dlq WHERE {' AND '.join(clauses)} "  # noqa: S608 - see above
            f"ORDER BY ingested_at DESC, kafka_offset DESC LIMIT {int(limit)}"
        )
        result = QueryBuilder().register("dlq", DeltaTable(uri, storage_options=options)).execute(sql).read_all()
        columns = {name: result.column(name).to_pylist() for name in _DLQ_COLUMNS}
        out: list[StoredLetter] = []
        seen: set[tuple[str, int, int]] = set()
        for i in range(result.num_rows):
            topic, partition, offset = (
                columns["kafka_topic"][i],
                columns["kafka_partition"][i],
                columns["kafka_offset"][i],
            )
            if (topic, partition, offset) in seen:  # the job appends at least once: a row may be there twice
                continue
            seen.add((topic, partition, offset))
            at = columns["ingested_at"][i]
            letter = DeadLetter(
                reason=columns["reason"][i] or "",
                error_class="InvalidEvent",
                stage="stream",
                tenant_id=self._names.tenant_id,
                origin_topic=topic,
                origin_partition=partition,
                origin_offset=offset,
                field=columns["field"][i],
            )
            out.append(
                StoredLetter(
                    "stream",
                    partition,
                    offset,
                    at if at.tzinfo is not None else at.replace(tzinfo=UTC),
                    columns["raw_key"][i],
                    columns["raw_value"][i],
                    _raw_headers(columns["raw_headers"][i]),
                    letter,
                    topic_class="priority" if topics[topic] == "priority" else "bulk",
                )
            )
        return out

    def scan(self) -> Scan:
        limit = self._settings.dead_letters.scan_max_records
        letters = self._query("TRUE", limit + 1)
        return Scan(letters[:limit], len(letters) > limit)

    def get(self, topic_class: TopicClass, partition: int, offset: int) -> StoredLetter | None:
        topic = self._names.topic(topic_class)
        where = f"kafka_topic = '{topic}' AND kafka_partition = {int(partition)} AND kafka_offset = {int(offset)}"
        found = self._query(where, 1)
        return found[0] if found else None
