"""The per-tenant Delta tables the job writes, their schemas, idempotent creation and additive schema evolution.

The current-state tables follow the state specs (``state.STATE_SPECS``): a spec's columns, typed by ``COLUMN_TYPES``,
plus the derived columns a table keeps beside them (``DERIVED``: the assets' health). A field added to a spec, or a
new spec, therefore gets its column or table without DDL by hand: ``ensure_tables`` creates missing tables and adds
missing columns to existing ones (old rows read null). Adding nullable columns needs no new table feature (no column
mapping), so the protocol stays one Trino 476 reads.

Both are delta-rs commits, not Spark's: a new dedicated tenant's eight tables take about 0.2 s where Spark's
``DeltaTable.createIfNotExists`` took 10 to 30 s on two cores (a JVM commit per table), which every job start on a new
tenant, ``lake init`` and dedicated provisioning paid. The log is the one Spark wrote: protocol (1, 2), the same
schema string, deletion vectors off.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from deltalake import DeltaTable, Field, Schema
from deltalake.exceptions import CommitFailedError, DeltaError
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from metalake.lake_uri import LakeRoot, delta_rs_table_uri
from processors.enrichment.health import HEALTH_COLUMNS
from processors.enrichment.state import STATE_SPECS, StateSpec
from tenants.naming import POOLED_TABLES, TENANT_COLUMNS, TenantNames, pooled_table_path, unrouted_lake_dir

log = logging.getLogger(__name__)


def _schema(*fields: tuple[str, DataType]) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in fields])


_STRINGS = ArrayType(StringType())

# The type of every state column, by name (a name means the same thing in every state table). A spec field missing
# here fails at import, naming the field: add its type here.
COLUMN_TYPES: Mapping[str, DataType] = {
    # keys
    "urn": StringType(),
    "tag": StringType(),
    "upstream": StringType(),
    "incident_id": StringType(),
    "origin": StringType(),
    "aspect": StringType(),
    # assets
    "kind": StringType(),
    "name": StringType(),
    "platform": StringType(),
    "qualified_name": StringType(),
    "description": StringType(),
    "data_type": StringType(),
    "owners": _STRINGS,
    "properties": MapType(StringType(), StringType()),
    # classifications
    "source": StringType(),
    "propagate": BooleanType(),
    "confidence": DoubleType(),
    "rule": StringType(),
    "actor": StringType(),
    "remove_propagations_on_entity_delete": BooleanType(),
    "restrict_propagation_through_lineage": BooleanType(),
    # lineage edges
    "blocked_tags": _STRINGS,
    "transformation": StringType(),
    "propagation": StringType(),
    # propagated tags
    "path": _STRINGS,
    "depth": LongType(),
    # incidents
    "status": StringType(),
    "incident_type": StringType(),
    "webhook_type": StringType(),
    "feedback": StringType(),
    "severity": StringType(),
    "owner": StringType(),
    "url": StringType(),
    "summary": StringType(),
    # asset edits (the description or a property's value; owners and actor are typed above)
    "text": StringType(),
    # meta (state.META)
    "deleted": BooleanType(),
    "version": LongType(),
    "event_id": StringType(),
    "event_time": TimestampType(),
    "updated_at": TimestampType(),
    # the assets' health (health.HEALTH_COLUMNS), derived from the incidents table
    "health": StringType(),
    "health_severity": StringType(),
    "open_incidents": IntegerType(),
    "open_incident_ids": _STRINGS,
    "health_version": LongType(),
    "health_event_id": StringType(),
    "health_updated_at": TimestampType(),
}

# Columns a state table keeps beside its spec's: written by the job from other tables, never by the spec's events.
DERIVED: Mapping[str, tuple[str, ...]] = {"assets": HEALTH_COLUMNS}


def typed(columns: Sequence[str]) -> StructType:
    unknown = [c for c in columns if c not in COLUMN_TYPES]
    if unknown:
        raise KeyError(f"state columns without a Delta type: {unknown}; add them to tables.COLUMN_TYPES")
    return _schema(*((c, COLUMN_TYPES[c]) for c in columns))


def source_schema(spec: StateSpec) -> StructType:
    """The schema of the rows a batch MERGEs into the spec's table: the spec's columns, in ``spec.columns`` order."""
    return typed(spec.columns)


EVENTS = _schema(
    ("event_id", StringType()),
    ("event_type", StringType()),
    ("source", StringType()),
    ("subject", StringType()),
    ("version", LongType()),
    ("event_time", TimestampType()),
    ("data", StringType()),
    ("traceparent", StringType()),
    ("kafka_topic", StringType()),
    ("kafka_partition", IntegerType()),
    ("kafka_offset", LongType()),
    ("ingested_at", TimestampType()),
    ("event_date", DateType()),
)

DLQ = _schema(
    ("reason", StringType()),
    ("field", StringType()),
    ("raw_key", BinaryType()),
    ("raw_value", BinaryType()),
    ("raw_headers", StringType()),
    ("kafka_topic", StringType()),
    ("kafka_partition", IntegerType()),
    ("kafka_offset", LongType()),
    ("kafka_time", TimestampType()),
    ("ingested_at", TimestampType()),
)


@dataclass(frozen=True)
class TableSpec:
    name: str
    schema: StructType
    partition_by: tuple[str, ...] = ()


def state_table(spec: StateSpec) -> TableSpec:
    return TableSpec(spec.table, typed((*spec.columns, *DERIVED.get(spec.table, ()))))


TABLES: tuple[TableSpec, ...] = (
    TableSpec("events", EVENTS, ("event_date",)),
    *(state_table(spec) for spec in STATE_SPECS),
    TableSpec("_dlq", DLQ),
)
SCHEMAS = {spec.name: spec.schema for spec in TABLES}

TENANT = _schema(("tenant_id", StringType()), ("tenant_bucket", IntegerType()))


def pooled_spec(spec: TableSpec) -> TableSpec:
    """The shared table of a kind: the tenant columns first, partitioned by the tenant's bucket (after the date for
    ``events``), so a tenant's reads, MERGEs and deletes prune to its bucket's files."""
    return TableSpec(
        spec.name, StructType([*TENANT.fields, *spec.schema.fields]), (*spec.partition_by, "tenant_bucket")
    )


POOLED_SPECS: Mapping[str, TableSpec] = {spec.name: pooled_spec(spec) for spec in TABLES if spec.name in POOLED_TABLES}

# Spark SQL type names (``DataType.simpleString``) of the state columns, for schemas built outside Spark (Arrow).
SQL_TYPES: Mapping[str, str] = {name: dtype.simpleString() for name, dtype in COLUMN_TYPES.items()}
_BY_SQL: Mapping[str, DataType] = {
    dtype.simpleString(): dtype
    for dtype in (*COLUMN_TYPES.values(), BinaryType(), DateType(), TimestampType(), IntegerType())
}


def spark_schema(columns: Sequence[tuple[str, str]]) -> StructType:
    """A Spark schema from (name, Spark SQL type name) pairs (``rows.PARSED_COLUMNS``, ``rows.folded_columns``)."""
    return _schema(*((name, _BY_SQL[sql]) for name, sql in columns))


@dataclass(frozen=True)
class Layout:
    """Where one query writes: the pooled tables (shared by every pooled tenant, rows keyed by the tenant columns)
    or a dedicated tenant's own tables (no tenant columns). ``spec`` and ``path`` answer per logical table."""

    lake_root: LakeRoot
    tenant: TenantNames | None = None

    @property
    def shared(self) -> bool:
        return self.tenant is None

    def spec(self, table: str) -> TableSpec:
        return POOLED_SPECS[table] if self.shared else next(t for t in TABLES if t.name == table)

    def path(self, table: str) -> str:
        return str(self.location(table))

    def location(self, table: str) -> LakeRoot:
        if self.tenant is None:
            return pooled_table_path(self.lake_root, table)
        return self.tenant.delta_path(table)

    @property
    def tenant_columns(self) -> tuple[str, ...]:
        """The columns that say whose a row is: written and matched on in shared tables only."""
        return TENANT_COLUMNS if self.shared else ()

    def tables(self) -> list[tuple[TableSpec, LakeRoot]]:
        """Every table the query writes, with its location: the pooled query also writes the unrouted dead letters
        (records naming no valid tenant), which keep the plain ``_dlq`` schema."""
        out = [(self.spec(t.name), self.location(t.name)) for t in TABLES]
        if self.shared:
            out.append((TableSpec("_dlq", DLQ), unrouted_lake_dir(self.lake_root) / "_dlq"))
        return out

    @property
    def unrouted_dlq(self) -> str:
        """Dead letters that name no valid tenant (the pooled query only)."""
        return str(unrouted_lake_dir(self.lake_root) / "_dlq")


def missing_columns(held: StructType, wanted: StructType) -> list[StructField]:
    """The columns of ``wanted`` that ``held`` lacks, in ``wanted``'s order. Names compare case-insensitively, as
    Delta does. A column held with another type is left as it is: changing a type is not additive, and the write
    that needs it fails with Delta's own message."""
    have = {f.name.lower(): f for f in held.fields}
    out = []
    for f in wanted.fields:
        old = have.get(f.name.lower())
        if old is None:
            out.append(f)
        elif old.dataType != f.dataType:
            log.warning(
                "enrichment.schema_type_differs",
                extra={"column": f.name, "held": old.dataType.simpleString(), "wanted": f.dataType.simpleString()},
            )
    return out


# Deletion vectors off, as the job's Spark session sets for the tables it would create (``session.py``).
_CONFIGURATION = {"delta.enableDeletionVectors": "false"}
# A commit lost to another writer of the table (a job creating the tables beside ``lake init``, an append beside a
# schema change): read the table again and redo what is still missing.
_ATTEMPTS = 5


def ensure_tables(
    tables: Sequence[tuple[TableSpec, LakeRoot]], storage: Mapping[str, str] | None
) -> dict[str, list[str]]:
    """Create the missing tables and add the columns existing ones lack; return the columns added per table. Safe to
    call again and beside other creators and writers (a lost commit is redone). ``storage``: delta-rs' storage
    options for a lake on S3 (``metalake.s3.lake_storage_options``), None for a local one."""
    added: dict[str, list[str]] = {}
    for spec, path in tables:
        columns = _ensure(spec, delta_rs_table_uri(path), dict(storage) if storage else None)
        if columns:
            added[spec.name] = columns
            log.info("enrichment.schema_evolved", extra={"table": spec.name, "columns": columns})
    return added


def _ensure(spec: TableSpec, uri: str, options: dict[str, str] | None) -> list[str]:
    for attempt in range(1, _ATTEMPTS + 1):
        table = _open_or_create(spec, uri, options)
        missing = missing_columns(held_schema(table), spec.schema)
        if not missing:
            return []
        try:
            table.alter.add_columns([Field.from_json(f.json()) for f in missing])
            return [f.name for f in missing]
        except CommitFailedError:
            if attempt == _ATTEMPTS:
                raise
            time.sleep(0.1 * attempt)
    raise AssertionError("unreachable: the last attempt returns or raises")


def _open_or_create(spec: TableSpec, uri: str, options: dict[str, str] | None) -> DeltaTable:
    if not DeltaTable.is_deltatable(uri, storage_options=options):
        schema = Schema.from_json(spec.schema.json())
        partitions = list(spec.partition_by) or None
        try:
            DeltaTable.create(
                uri,
                schema,
                partition_by=partitions,
                mode="ignore",
                configuration=_CONFIGURATION,
                storage_options=options,
            )
        except DeltaError:
            # Two creators racing for version 0: the loser's commit fails and the table exists, all either wanted.
            if not DeltaTable.is_deltatable(uri, storage_options=options):
                raise
    return DeltaTable(uri, storage_options=options)


def held_schema(table: DeltaTable) -> StructType:
    """A table's schema as Spark types (delta-rs and Spark share Delta's schema JSON)."""
    return StructType.fromJson(json.loads(table.schema().to_json()))
