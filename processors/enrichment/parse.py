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
            tenant=exc.tenant_id,
            valid=False,
            event_id=None,
            event_type=None,
            source=None,
            subject=None,
            event_time=None,
            version=None,
            data=None,
            reason=exc.reason,
            field=exc.field,
            raw_key=key_b,
            raw_value=value_b,
            raw_headers=_headers_json(hdrs),
            topic=topic,
            partition=partition,
            offset=offset,
            kafka_time=kafka_time,
            traceparent=None,
        )
    return ParsedRow(
        tenant=event.tenantid,
        valid=True,
        event_id=event.id,
        event_type=event.type,
        source=event.source,
        subject=event.subject,
        event_time=event.time.astimezone(UTC),
        version=event.version,
        data=json.dumps(event.data, separators=(",", ":"), sort_keys=True),
        reason=None,
        field=None,
        raw_key=key_b,
        # Kept for valid rows too: a dedicated job dead-letters another tenant's records with their exact bytes.
        raw_value=value_b,
        raw_headers=None,
        topic=topic,
        partition=partition,
        offset=offset,
        kafka_time=kafka_time,
        traceparent=event.traceparent,
    )


def foreign_tenant(row: ParsedRow, owner: str) -> ParsedRow:
    """A record that reached ``owner``'s dedicated topics but names another tenant: a dead letter of ``owner``.

    The reason does not name the other tenant: the owner must not learn who else exists.
    """
    return row._replace(
        tenant=owner, valid=False, reason="ce_tenantid does not match the topic's tenant", field="ce_tenantid"
    )


def parse_rows(rows: Iterable[Any]) -> Iterator[ParsedRow]:
    """Parse rows of (key, value, headers, topic, partition, offset, timestamp) as the Kafka source gives them."""
    for r in rows:
        yield parse_record(r["key"], r["value"], r["headers"], r["topic"], r["partition"], r["offset"], r["timestamp"])
