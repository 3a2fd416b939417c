"""The streaming queries' lag in ``metalake_consumer_lag_records{group=<query>, topic, partition}``, at scrape time.

A query keeps its offsets in its checkpoint, not in a consumer group: its processed offset per partition is the end
offset of its last completed batch (``lastProgress``), and the partitions' end offsets come from one ``ListOffsets``
request for all of them. The query's role (``lake``, ``mongo-priority``, ``mongo-bulk``) stands for the group.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from confluent_kafka import TopicPartition
from confluent_kafka.admin import AdminClient, OffsetSpec

from metalake.kafka.config import client_config
from processors.enrichment.freshness import query_label
from processors.enrichment.settings import StreamSettings

log = logging.getLogger(__name__)

#: (query name, its last progress as PySpark gives it, or None before its first batch).
Progress = tuple[str, Mapping[str, Any] | None]
_TIMEOUT_S = 2.0


def processed_offsets(progress: Mapping[str, Any] | None) -> dict[tuple[str, int], int]:
    """(topic, partition) -> the next offset the query reads, from a progress' Kafka sources' ``endOffset``."""
    out: dict[tuple[str, int], int] = {}
    for source in (progress or {}).get("sources") or []:
        end = source.get("endOffset")
        offsets = json.loads(end) if isinstance(end, str) else end
        if not isinstance(offsets, Mapping):
            continue
        for topic, partitions in offsets.items():
            if isinstance(partitions, Mapping):
                out.update(((str(topic), int(p)), int(o)) for p, o in partitions.items())
    return out


def lag_readings(
    progresses: Iterable[Progress], end_offsets: Callable[[list[tuple[str, int]]], Mapping[tuple[str, int], int]]
) -> list[tuple[float, Mapping[str, str]]]:
    """The gauge's readings: end offset minus processed offset, per query and partition."""
    processed = {name: processed_offsets(progress) for name, progress in progresses}
    wanted = sorted({key for offsets in processed.values() for key in offsets})
    ends = end_offsets(wanted) if wanted else {}
    return [
        (float(max(0, ends[key] - offset)), {"group": query_label(name), "topic": key[0], "partition": str(key[1])})
        for name, offsets in processed.items()
        for key, offset in sorted(offsets.items())
        if key in ends
    ]


class EndOffsets:
    """The latest offsets of partitions, in one ListOffsets request; the admin client is made at the first scrape."""

    def __init__(self, settings: StreamSettings) -> None:
        self._settings = settings
        self._admin: AdminClient | None = None
        self._lock = threading.Lock()

    def __call__(self, partitions: list[tuple[str, int]]) -> dict[tuple[str, int], int]:
        with self._lock:
            if self._admin is None:
                self._admin = AdminClient(client_config(self._settings))
            admin = self._admin
        latest = OffsetSpec.latest()  # type: ignore[no-untyped-call]
        futures = admin.list_offsets({TopicPartition(t, p): latest for t, p in partitions}, request_timeout=_TIMEOUT_S)
        return {(tp.topic, tp.partition): int(f.result(timeout=_TIMEOUT_S).offset) for tp, f in futures.items()}


__all__ = ["EndOffsets", "Progress", "lag_readings", "processed_offsets"]
