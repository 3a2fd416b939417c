"""The lake query's record work as Arrow batch functions, for ``mapInArrow``: they run on Spark executors.

``parse_batches`` turns Kafka records into parsed rows (``PARSED``): an event, or a dead letter with its reason and raw
bytes, each with its tenant and the state table and key it feeds. ``fold_batches`` folds the state rows of each key
into one row per key (``FOLDED``: the union of every state spec's columns). The job repartitions by (tenant, state
table, key) between the two, so all of a key's events reach one fold, wherever Kafka put them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from typing import Any

import pyarrow as pa

from processors.enrichment.parse import ParsedRow, parse_record
from processors.enrichment.state import STATE_SPECS, StateSpec, fold
from tenants.naming import tenant_bucket

# Which state table an event type feeds (each type feeds at most one).
SPEC_BY_TYPE: Mapping[str, StateSpec] = {t: spec for spec in STATE_SPECS for t in spec.types}
SPEC_BY_TABLE: Mapping[str, StateSpec] = {spec.table: spec for spec in STATE_SPECS}

# Spark SQL types by name, so the Spark schemas (``tables``) and these Arrow schemas come from one list.
PARSED_COLUMNS: tuple[tuple[str, str], ...] = (
    ("tenant_id", "string"),
    ("tenant_bucket", "int"),
    ("valid", "boolean"),
    ("event_id", "string"),
    ("event_type", "string"),
    ("source", "string"),
    ("subject", "string"),
    ("version", "bigint"),
    ("event_time", "timestamp"),
    ("event_date", "date"),
    ("data", "string"),
    ("traceparent", "string"),
    ("reason", "string"),
    ("field", "string"),
    ("raw_key", "binary"),
    ("raw_value", "binary"),
    ("raw_headers", "string"),
    ("kafka_topic", "string"),
    ("kafka_partition", "int"),
    ("kafka_offset", "bigint"),
    ("kafka_time", "timestamp"),
    ("state_table", "string"),
    ("state_key", "string"),
)

_ARROW_TYPES: Mapping[str, pa.DataType] = {
    "string": pa.string(),
    "int": pa.int32(),
    "bigint": pa.int64(),
    "boolean": pa.bool_(),
    "double": pa.float64(),
    "binary": pa.binary(),
    "date": pa.date32(),
    # Spark hands timestamps to Python workers as UTC microseconds and reads them back the same way.
    "timestamp": pa.timestamp("us", tz="UTC"),
    "array<string>": pa.list_(pa.string()),
    "map<string,string>": pa.map_(pa.string(), pa.string()),
}


def arrow_schema(columns: Iterable[tuple[str, str]]) -> pa.Schema:
    return pa.schema([pa.field(name, _ARROW_TYPES[sql]) for name, sql in columns])


PARSED = arrow_schema(PARSED_COLUMNS)


def _state(row: ParsedRow) -> tuple[str | None, str | None]:
    """The state table a valid event feeds and its key there (``StateSpec.mongo_id``), or (None, None)."""
    spec = SPEC_BY_TYPE.get(row.event_type or "")
    if spec is None or not row.valid:
        return None, None
    data = json.loads(row.data or "{}")
    if any(data.get(k) is None for k in spec.key):
        return None, None  # every schema requires its key fields; fold skips such a row too
    return spec.table, spec.mongo_id(data)


def parsed_record(row: ParsedRow) -> dict[str, Any]:
    table, key = _state(row)
    return {
        "tenant_id": row.tenant,
        "tenant_bucket": tenant_bucket(row.tenant) if row.tenant else None,
        "valid": row.valid,
        "event_id": row.event_id,
        "event_type": row.event_type,
        "source": row.source,
        "subject": row.subject,
        "version": row.version,
        "event_time": row.event_time,
        "event_date": row.event_time.date() if row.event_time else None,
        "data": row.data,
        "traceparent": row.traceparent,
        "reason": row.reason,
        "field": row.field,
        "raw_key": row.raw_key,
        "raw_value": row.raw_value,
        "raw_headers": row.raw_headers,
        "kafka_topic": row.topic,
        "kafka_partition": row.partition,
        "kafka_offset": row.offset,
        "kafka_time": row.kafka_time,
        "state_table": table,
        "state_key": key,
    }


def parse_batches(only_tenant: str | None) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function over Kafka source batches (key, value, headers, topic, partition, offset,
    timestamp). A dedicated tenant's query (``only_tenant``) dead-letters records that name another tenant."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            out = []
            for r in batch.to_pylist():
                row = parse_record(
                    r["key"],
                    r["value"],
                    r["headers"],
                    r["topic"],
                    r["partition"],
                    r["offset"],
                    r["timestamp"],
                    only_tenant,
                )
                out.append(parsed_record(row))
            yield pa.RecordBatch.from_pylist(out, schema=PARSED)

    return run


def _parsed_row(r: Mapping[str, Any]) -> ParsedRow:
    return ParsedRow(
        tenant=r["tenant_id"],
        valid=True,
        event_id=r["event_id"],
        event_type=r["event_type"],
        source=r["source"],
        subject=r["subject"],
        event_time=r["event_time"],
        version=r["version"],
        data=r["data"],
        reason=None,
        field=None,
        raw_key=None,
        raw_value=None,
        raw_headers=None,
        topic=r["kafka_topic"],
        partition=r["kafka_partition"],
        offset=r["kafka_offset"],
        kafka_time=r["kafka_time"],
        traceparent=r["traceparent"],
    )


def folded_columns(column_types: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    """Tenant, state table, then every column of every state spec once (types from ``column_types``)."""
    names: dict[str, None] = {}
    for spec in STATE_SPECS:
        names.update(dict.fromkeys(spec.columns))
    return (
        ("tenant_id", "string"),
        ("tenant_bucket", "int"),
        ("state_table", "string"),
        *tuple((name, column_types[name]) for name in names),
    )


def _map_value(value: Any) -> Any:  # noqa: ANN401
    # Arrow's map type takes (key, value) pairs.
    return list(value.items()) if isinstance(value, Mapping) else value


def fold_batches(schema: pa.Schema, now: datetime) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function that folds a partition's state events (parsed rows with a state table) into one
    row per (tenant, table, key), with the columns of ``schema`` (spec columns a table lacks stay null)."""
    maps = {f.name for f in schema if pa.types.is_map(f.type)}

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        groups: dict[tuple[str, int, str], list[ParsedRow]] = {}
        for batch in batches:
            for r in batch.to_pylist():
                groups.setdefault((r["tenant_id"], r["tenant_bucket"], r["state_table"]), []).append(_parsed_row(r))
        out = []
        for (tenant, bucket, table), rows in groups.items():
            for state in fold(SPEC_BY_TABLE[table], rows, now):
                record = {"tenant_id": tenant, "tenant_bucket": bucket, "state_table": table}
                record.update({k: (_map_value(v) if k in maps else v) for k, v in state.items()})
                out.append(record)
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=schema)

    return run
