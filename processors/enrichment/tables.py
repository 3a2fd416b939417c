"""The per-tenant Delta tables the job writes, their schemas, idempotent creation and additive schema evolution.

The current-state tables follow the state specs (``state.STATE_SPECS``): a spec's columns, typed by ``COLUMN_TYPES``,
plus the derived columns a table keeps beside them (``DERIVED``: the assets' health). A field added to a spec, or a
new spec, therefore gets its column or table without DDL by hand: ``ensure_tables`` creates missing tables and adds
missing columns to existing ones (``ALTER TABLE ADD COLUMNS``: old rows read null). Adding nullable columns needs no
new table feature (no column mapping), so the protocol stays one Trino 476 reads.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
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

from metalake.lake_uri import LakeRoot
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
        if self.tenant is None:
            return str(pooled_table_path(self.lake_root, table))
        return str(self.tenant.delta_path(table))

    @property
    def tenant_columns(self) -> tuple[str, ...]:
        """The columns that say whose a row is: written and matched on in shared tables only."""
        return TENANT_COLUMNS if self.shared else ()

    def tables(self) -> list[tuple[TableSpec, str]]:
        """Every table the query writes, with its path: the pooled query also writes the unrouted dead letters
        (records naming no valid tenant), which keep the plain ``_dlq`` schema."""
        out = [(self.spec(t.name), self.path(t.name)) for t in TABLES]
        if self.shared:
            out.append((TableSpec("_dlq", DLQ), self.unrouted_dlq))
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


def add_columns_sql(path: str, columns: Sequence[StructField]) -> str:
    """``ALTER TABLE ... ADD COLUMNS`` for a path-based table. Paths come from ``tenants.naming`` (validated ids)."""
    quoted = path.replace("`", "``")
    ddl = ", ".join(f"`{c.name}` {c.dataType.simpleString()}" for c in columns)
    return f"ALTER TABLE delta.`{quoted}` ADD COLUMNS ({ddl})"


def ensure_tables(spark: SparkSession, tables: Sequence[tuple[TableSpec, str]]) -> dict[str, list[str]]:
    """Create the missing tables and add the columns existing ones lack; return the columns added per table. Safe to
    call again (and concurrently with writers: a conflict is a retryable Delta conflict)."""
    added: dict[str, list[str]] = {}
    for spec, path in tables:
        builder = DeltaTable.createIfNotExists(spark).location(path).addColumns(spec.schema)
        if spec.partition_by:
            builder = builder.partitionedBy(*spec.partition_by)
        table = builder.execute()
        # createIfNotExists keeps an existing table's schema as it is, whatever the builder says.
        missing = missing_columns(table.toDF().schema, spec.schema)
        if missing:
            spark.sql(add_columns_sql(path, missing))
            added[spec.name] = [c.name for c in missing]
            log.info("enrichment.schema_evolved", extra={"table": spec.name, "columns": added[spec.name]})
    return added
