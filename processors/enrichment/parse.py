"""Turning raw Kafka records into event rows or dead letters. Pure Python: runs on Spark executors and in unit tests."""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, NamedTuple

from metalake.events.envelope import InvalidEvent, decode_record

class ParsedRow(NamedTuple):
    """One Kafka record after parsing: ``valid`` rows carry the event, the others the reason and the raw bytes."""

    tenant: str | None
    valid: bool
    event_id: str | None
    event_type: str | None
    source: str | None
    subject: str | None
    event_time: datetime | None
    version: int | None
    data: str | None
    reason: str | None
    field: str | None
    raw_key: bytes | None
    raw_value: bytes | None
    raw_headers: str | None
    topic: str
    partition: int
    offset: int
    kafka_time: datetime | None
    traceparent: str | None


def _headers(raw: Sequence[Any] | None) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for h in raw or ():
        key, value = (h["key"], h["value"]) if isinstance(h, dict) else (h[0], h[1])
        out.append((str(key), bytes(value) if value is not None else None))
    return out


def _headers_json(headers: list[tuple[str, bytes | None]]) -> str:
    return json.dumps({k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in headers})


def parse_record(
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Any] | None,
    topic: str,
    partition: int,
    offset: int,
    kafka_time: datetime | None,
) -> ParsedRow:
    hdrs = _headers(headers)
    key_b = bytes(key) if key is not None else None
    value_b = bytes(value) if value is not None else None
    try:
        event = decode_record(key_b, value_b, hdrs)
    except InvalidEvent as exc:
        return ParsedRow(
            exc.tenant_id, False, None, None, None, None, None, None, None, exc.reason, exc.field,
            key_b, value_b, _headers_json(hdrs), topic, partition, offset, kafka_time, None,
        )
    return ParsedRow(
        event.tenantid, True, event.id, event.type, event.source, event.subject,
        event.time.astimezone(UTC), event.version, json.dumps(event.data, separators=(",", ":"), sort_keys=True),
        None, None, key_b, None, None, topic, partition, offset, kafka_time, event.traceparent,
    )


def parse_rows(rows: Iterable[Any]) -> Iterator[ParsedRow]:
    """Parse rows of (key, value, headers, topic, partition, offset, timestamp) as the Kafka source gives them."""
    for r in rows:
        yield parse_record(r["key"], r["value"], r["headers"], r["topic"], r["partition"], r["offset"], r["timestamp"])
