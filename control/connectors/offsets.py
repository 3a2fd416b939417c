"""Source offsets in the compacted topic ``CONNECT_OFFSETS_TOPIC``, as Kafka Connect's ``offset.storage.topic``.

Record key: the JSON array ``[tenant, connector, partition key]`` (compact separators, so equal keys are equal
bytes and compaction keeps one record per key); value: the JSON offset, or no value (a tombstone) to forget the
partition. Loading reads the topic from the beginning up to the end offsets taken at the start, bounded by a timeout;
the last value per key wins.

Offsets hold URNs (a crawler's table, its columns' names, its foreign keys' upstreams). A GDPR erase rewrites every
record of the tenant that mentions the erased URN (``forget_urn``: the URN leaves a list) or tombstones it (the
record is about the asset itself, or names it elsewhere). The superseded record stays in the topic until compaction
removes it: the topic's ``segment.ms`` and ``max.compaction.lag.ms`` (``topic_config``) bound that.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

from control.connectors.settings import ConnectorControlSettings, ConnectSettings
from metalake.kafka import EventProducer, RawRecord, ensure_topics
from metalake.kafka.admin import ensure_topic_config
from metalake.kafka.config import consumer_config
from metalake.urn import AssetUrn, InvalidUrn, canonical_urn
from tenants.naming import CONNECT_OFFSETS_TOPIC

Offset = dict[str, Any]
# Each read of the topic takes a throwaway consumer group of this prefix (one prefixed ACL covers them all).
READER_GROUP_PREFIX = "metalake-offsets-reader-"


class OffsetsUnavailable(RuntimeError):
    """The offsets topic could not be read to its end in time: resuming now could republish or skip data."""


def offset_key(tenant: str, connector: str, partition: str) -> bytes:
    return json.dumps([tenant, connector, partition], separators=(",", ":"), ensure_ascii=False).encode()


def topic_config(connect: ConnectSettings) -> dict[str, str]:
    """The offsets topic's configuration: compacted, and superseded records removed within a bounded time."""
    return {
        "cleanup.policy": "compact",
        "segment.ms": str(connect.offsets_segment_ms),
        "max.compaction.lag.ms": str(connect.offsets_max_compaction_lag_ms),
        "delete.retention.ms": str(connect.offsets_delete_retention_ms),
    }


def urn_matcher(urn: str, include_children: bool) -> Callable[[str], bool]:
    """Whether a string is the URN (any spelling of it), or with children a URN under it."""
    target = canonical_urn(urn)
    prefix = target + "/"

    def matches(value: str) -> bool:
        if not value.startswith("urn:metalake:"):
            return False
        try:
            canonical = canonical_urn(value)
        except InvalidUrn:
            return False
        return canonical == target or (include_children and canonical.startswith(prefix))

    return matches


class _Tombstone(Exception):
    """Raised inside :func:`scrub`'s walk: the record names the URN where it cannot simply be left out."""


def scrub(partition: str, offset: Mapping[str, Any], matches: Callable[[str], bool]) -> tuple[bool, Offset | None]:
    """``(changed, offset)``: the offset without the URN, a copy whose lists lost the elements naming it (a URN, or
    a name that is a child of the offset's own ``urn``, e.g. a table's column); ``None`` (tombstone it) when the
    record is about the URN or names it anywhere else (the partition key included)."""
    if partition_mentions(partition, matches):
        return True, None
    own = offset.get("urn")
    parent: AssetUrn | None = None
    if isinstance(own, str):
        try:
            parent = AssetUrn.parse(own)
        except InvalidUrn:
            parent = None

    def names_it(value: str) -> bool:
        if matches(value):
            return True
        if parent is None or value.startswith("urn:"):
            return False
        try:
            return matches(str(parent.child(value)))
        except InvalidUrn:
            return False

    changed = False

    def walk(value: Any) -> Any:  # noqa: ANN401
        nonlocal changed
        if isinstance(value, str):
            if matches(value):
                raise _Tombstone
            return value
        if isinstance(value, list):
            kept = [walk(v) for v in value if not (isinstance(v, str) and names_it(v))]
            changed = changed or len(kept) != len(value)
            return kept
        if isinstance(value, dict):
            return {k: walk(v) for k, v in value.items()}
        return value

    try:
        scrubbed: Offset = walk(dict(offset))
    except _Tombstone:
        return True, None
    return changed, scrubbed


def partition_mentions(partition: str, matches: Callable[[str], bool]) -> bool:
    """Whether a partition key (a plugin's own string, often JSON) holds the URN among its strings."""
    try:
        parsed = json.loads(partition)
    except json.JSONDecodeError:
        return matches(partition)
    stack = [parsed]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and matches(item):
            return True
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
    return False


class OffsetKey(NamedTuple):
    """The key of an offsets record: one source partition of one connector instance."""

    tenant: str
    connector: str
    partition: str


def _parse_key(raw: bytes | None) -> OffsetKey | None:
    try:
        key = json.loads(raw or b"")
    except (UnicodeDecodeError, json.JSONDecodeError):
        return None  # not ours: the topic is shared by every connector instance, keep reading
    if isinstance(key, list) and len(key) == 3 and all(isinstance(k, str) for k in key):
        return OffsetKey(*key)
    return None


class OffsetStore:
    """Reads and writes one topic of offsets for every tenant's connectors."""

    def __init__(
        self,
        settings: ConnectorControlSettings,
        producer: EventProducer | None = None,
        topic: str = CONNECT_OFFSETS_TOPIC,
    ):
        self._settings = settings
        self._topic = topic
        self._producer = producer

    def _producer_or_new(self) -> EventProducer:
        if self._producer is None:
            self._producer = EventProducer(self._settings)
        return self._producer

    def ensure_topic(self) -> None:
        """Create the compacted offsets topic if it does not exist (one partition: offsets are few and small), and
        give an existing one the configuration of :func:`topic_config`."""
        config = topic_config(self._settings.connect)
        if not ensure_topics(self._settings, [self._topic], partitions=1, config=config):
            ensure_topic_config(self._settings, self._topic, config)

    def store(self, tenant: str, connector: str, offsets: Mapping[str, Mapping[str, Any] | None]) -> None:
        """Write offsets (``None``: forget the partition); returns once Kafka confirmed them (else PublishError).

        Callers write a batch's offsets only after Kafka confirmed the batch's records.
        """
        records = [
            RawRecord(
                self._topic,
                f"offset:{partition}",
                offset_key(tenant, connector, partition),
                None if offset is None else json.dumps(dict(offset), separators=(",", ":")).encode(),
                [],
            )
            for partition, offset in offsets.items()
        ]
        if records:
            self._producer_or_new().publish_raw(records)

    def forget_tenant(self, tenant: str, timeout_s: float | None = None) -> int:
        """Tombstone every live offset of the tenant's connectors; returns how many keys were tombstoned.

        The keys come from the topic itself, not from the control plane, so the offsets of a connector deleted
        earlier are found too. Returns once Kafka confirmed every tombstone (else :class:`PublishError`); raises
        :class:`OffsetsUnavailable` if the topic cannot be read to its end.
        """
        live = {c: offsets for (t, c), offsets in self.load_all(timeout_s).items() if t == tenant and offsets}
        for connector, offsets in live.items():
            self.store(tenant, connector, dict.fromkeys(offsets))
        return sum(len(offsets) for offsets in live.values())

    def forget_urn(
        self, tenant: str, urn: str, include_children: bool = False, timeout_s: float | None = None
    ) -> tuple[int, int]:
        """Rewrite or tombstone every live offset of the tenant's connectors that mentions ``urn`` (any spelling;
        with ``include_children`` also URNs under it): ``(rewritten, tombstoned)``. Returns once Kafka confirmed
        every record (else :class:`PublishError`); raises :class:`OffsetsUnavailable` if the topic cannot be read."""
        matches = urn_matcher(urn, include_children)
        rewritten = tombstoned = 0
        for (owner, connector), offsets in self.load_all(timeout_s).items():
            if owner != tenant:
                continue
            changes: dict[str, Mapping[str, Any] | None] = {}
            for partition, offset in offsets.items():
                changed, scrubbed = scrub(partition, offset, matches)
                if not changed:
                    continue
                changes[partition] = scrubbed
                if scrubbed is None:
                    tombstoned += 1
                else:
                    rewritten += 1
            self.store(tenant, connector, changes)
        return rewritten, tombstoned

    def load(self, tenant: str, connector: str, timeout_s: float | None = None) -> dict[str, Offset]:
        """The stored offset of every partition of one connector instance (last value per key wins)."""
        return self.load_all(timeout_s).get((tenant, connector), {})

    def load_all(self, timeout_s: float | None = None) -> dict[tuple[str, str], dict[str, Offset]]:
        """Every connector instance's offsets; raises :class:`OffsetsUnavailable` if the end is not reached in time."""
        timeout = timeout_s if timeout_s is not None else self._settings.connect.offsets_load_timeout_s
        deadline = time.monotonic() + timeout
        # A throwaway group id: partitions are assigned by hand and nothing is ever committed.
        consumer = Consumer(
            consumer_config(
                self._settings, f"{READER_GROUP_PREFIX}{uuid.uuid4().hex}", **{"isolation.level": "read_uncommitted"}
            )
        )
        try:
            return self._read(consumer, deadline, timeout)
        except KafkaException as exc:
            raise OffsetsUnavailable(f"cannot read {self._topic}: {exc}") from exc
        finally:
            consumer.close()

    def _read(self, consumer: Consumer, deadline: float, timeout: float) -> dict[tuple[str, str], dict[str, Offset]]:
        metadata = consumer.list_topics(self._topic, timeout=max(deadline - time.monotonic(), 0.1))
        topic = metadata.topics.get(self._topic)
        if topic is None or topic.error is not None:
            # Like a Connect worker, create the offsets topic on first use (a stack started before it existed).
            self.ensure_topic()
            return {}
        ends: dict[int, int] = {}
        starts: list[TopicPartition] = []
        for partition in topic.partitions:
            low, high = consumer.get_watermark_offsets(
                TopicPartition(self._topic, partition), timeout=max(deadline - time.monotonic(), 0.1)
            )
            if high > low:
                ends[partition] = high
                starts.append(TopicPartition(self._topic, partition, low))
        found: dict[tuple[str, str], dict[str, Offset]] = {}
        if not starts:
            return found
        consumer.assign(starts)
        while ends:
            if time.monotonic() > deadline:
                raise OffsetsUnavailable(f"offsets topic {self._topic} not read to its end within {timeout:.0f}s")
            for msg in consumer.consume(num_messages=1000, timeout=0.5):
                err = msg.error()
                if err is not None:
                    if err.fatal():
                        raise KafkaException(err)
                    continue
                self._apply(found, msg.key(), msg.value())
            for tp in consumer.position([TopicPartition(self._topic, p) for p in list(ends)]):
                if tp.offset >= ends[tp.partition]:
                    del ends[tp.partition]
        return found

    @staticmethod
    def _apply(found: dict[tuple[str, str], dict[str, Offset]], raw_key: bytes | None, raw_value: bytes | None) -> None:
        key = _parse_key(raw_key)
        if key is None:
            return
        offsets = found.setdefault((key.tenant, key.connector), {})
        if raw_value is None:
            offsets.pop(key.partition, None)
            return
        try:
            value = json.loads(raw_value)
        except (UnicodeDecodeError, json.JSONDecodeError):
            return
        if isinstance(value, dict):
            offsets[key.partition] = value

    def close(self) -> None:
        if self._producer is not None:
            self._producer.close()
