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


# The reason does not name the other tenant: the owner must not learn who else exists.
FOREIGN_TENANT = "ce_tenantid does not match the topic's tenant"


def _headers(raw: Sequence[Any] | None) -> list[tuple[str, bytes | None]]:
    out: list[tuple[str, bytes | None]] = []
    for h in raw or ():
        key, value = (h["key"], h["value"]) if isinstance(h, dict) else (h[0], h[1])
        out.append((str(key), bytes(value) if value is not None else None))
    return out


def _headers_json(headers: list[tuple[str, bytes | None]]) -> str:
    return json.dumps({k: (v.decode("utf-8", "replace") if v is not None else None) for k, v in headers})


def _dead_letter(  # noqa: PLR0913
    tenant: str | None,
    reason: str,
    field: str | None,
    key: bytes | None,
    value: bytes | None,
    headers: list[tuple[str, bytes | None]],
    topic: str,
    partition: int,
    offset: int,
    kafka_time: datetime | None,
) -> ParsedRow:
    """The one shape of a ``_dlq`` row: why (``reason``, ``field``), the raw record, and where it came from."""
    return ParsedRow(
        tenant=tenant,
        valid=False,
        event_id=None,
        event_type=None,
        source=None,
        subject=None,
        event_time=None,
        version=None,
        data=None,
        reason=reason,
        field=field,
        raw_key=key,
        raw_value=value,
        raw_headers=_headers_json(headers),
        topic=topic,
        partition=partition,
        offset=offset,
        kafka_time=kafka_time,
        traceparent=None,
    )


def parse_record(  # noqa: PLR0913
    key: bytes | None,
    value: bytes | None,
    headers: Sequence[Any] | None,
    topic: str,
    partition: int,
    offset: int,
    kafka_time: datetime | None,
    owner: str | None = None,
) -> ParsedRow:
    """An event row, or a dead letter. ``owner``: the dedicated tenant whose topics the record came from; a record
    naming another tenant is then a dead letter of ``owner``."""
    hdrs = _headers(headers)
    key_b = bytes(key) if key is not None else None
    value_b = bytes(value) if value is not None else None
    position = (topic, partition, offset, kafka_time)
    try:
        event = decode_record(key_b, value_b, hdrs)
    except InvalidEvent as exc:
        if owner is None or exc.tenant_id == owner:
            return _dead_letter(exc.tenant_id, exc.reason, exc.field, key_b, value_b, hdrs, *position)
        return _dead_letter(owner, FOREIGN_TENANT, "ce_tenantid", key_b, value_b, hdrs, *position)
    if owner is not None and event.tenantid != owner:
        return _dead_letter(owner, FOREIGN_TENANT, "ce_tenantid", key_b, value_b, hdrs, *position)
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
        # An event's bytes stay in Kafka and in ``events.data``: the lake keeps raw bytes of dead letters only.
        raw_value=None,
        raw_headers=None,
        topic=topic,
        partition=partition,
        offset=offset,
        kafka_time=kafka_time,
        traceparent=event.traceparent,
    )


def parse_rows(rows: Iterable[Any], owner: str | None = None) -> Iterator[ParsedRow]:
    """Parse rows of (key, value, headers, topic, partition, offset, timestamp) as the Kafka source gives them
    (``owner`` as in :func:`parse_record`)."""
    for r in rows:
        yield parse_record(
            r["key"], r["value"], r["headers"], r["topic"], r["partition"], r["offset"], r["timestamp"], owner
        )
