"""Source offsets in the compacted topic ``CONNECT_OFFSETS_TOPIC``, as Kafka Connect's ``offset.storage.topic``.

Record key: the JSON array ``[tenant, connector, partition key]`` (compact separators, so equal keys are equal
bytes and compaction keeps one record per key); value: the JSON offset, or no value (a tombstone) to forget the
partition. Loading reads the topic from the beginning up to the end offsets taken at the start, bounded by a timeout;
the last value per key wins.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Mapping
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

from metalake.kafka import EventProducer, RawRecord, ensure_topics
from metalake.kafka.config import consumer_config
from metalake.settings import Settings
from tenants.naming import CONNECT_OFFSETS_TOPIC

Offset = dict[str, Any]


class OffsetsUnavailable(RuntimeError):
    """The offsets topic could not be read to its end in time: resuming now could republish or skip data."""


def offset_key(tenant: str, connector: str, partition: str) -> bytes:
    return json.dumps([tenant, connector, partition], separators=(",", ":"), ensure_ascii=False).encode()


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

    def __init__(self, settings: Settings, producer: EventProducer | None = None, topic: str = CONNECT_OFFSETS_TOPIC):
        self._settings = settings
        self._topic = topic
        self._producer = producer

    def _producer_or_new(self) -> EventProducer:
        if self._producer is None:
            self._producer = EventProducer(self._settings)
        return self._producer

    def ensure_topic(self) -> None:
        """Create the compacted offsets topic if it does not exist (one partition: offsets are few and small)."""
        ensure_topics(self._settings, [self._topic], partitions=1, config={"cleanup.policy": "compact"})

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
                self._settings, f"metalake-offsets-reader-{uuid.uuid4().hex}", **{"isolation.level": "read_uncommitted"}
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
