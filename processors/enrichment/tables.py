"""The per-tenant Delta tables the job writes, their schemas, and idempotent creation."""

from __future__ import annotations

from dataclasses import dataclass

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
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

from tenants.naming import TenantNames


def _schema(*fields: tuple[str, object]) -> StructType:
    return StructType([StructField(name, dtype, True) for name, dtype in fields])  # type: ignore[arg-type]


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

ASSETS = _schema(
    ("urn", StringType()),
    ("kind", StringType()),
    ("name", StringType()),
    ("platform", StringType()),
    ("qualified_name", StringType()),
    ("description", StringType()),
    ("data_type", StringType()),
    ("owners", ArrayType(StringType())),
    ("properties", MapType(StringType(), StringType())),
    ("deleted", BooleanType()),
    ("version", LongType()),
    ("event_id", StringType()),
    ("event_time", TimestampType()),
    ("updated_at", TimestampType()),
)

_META = (
    ("deleted", BooleanType()),
    ("version", LongType()),
    ("event_id", StringType()),
    ("event_time", TimestampType()),
    ("updated_at", TimestampType()),
)

CLASSIFICATIONS = _schema(
    ("urn", StringType()),
    ("tag", StringType()),
    ("source", StringType()),
    ("propagate", BooleanType()),
    ("confidence", DoubleType()),
    ("rule", StringType()),
    ("actor", StringType()),
    *_META,
)

LINEAGE_EDGES = _schema(
    ("upstream", StringType()),
    ("urn", StringType()),
    ("blocked_tags", ArrayType(StringType())),
    ("transformation", StringType()),
    *_META,
)

INCIDENTS = _schema(
    ("incident_id", StringType()),
    ("urn", StringType()),
    ("status", StringType()),
    ("incident_type", StringType()),
    ("webhook_type", StringType()),
    ("feedback", StringType()),
    ("severity", StringType()),
    ("owner", StringType()),
    ("url", StringType()),
    ("summary", StringType()),
    *_META,
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


TABLES: tuple[TableSpec, ...] = (
    TableSpec("events", EVENTS, ("event_date",)),
    TableSpec("assets", ASSETS),
    TableSpec("classifications", CLASSIFICATIONS),
    TableSpec("lineage_edges", LINEAGE_EDGES),
    TableSpec("incidents", INCIDENTS),
    TableSpec("_dlq", DLQ),
)
SCHEMAS = {spec.name: spec.schema for spec in TABLES}


def ensure_tables(spark: SparkSession, names: TenantNames) -> None:
    """Create the tenant's tables if missing. Safe to call again; cheap after the first time per process."""
    for spec in TABLES:
        builder = DeltaTable.createIfNotExists(spark).location(str(names.delta_path(spec.name))).addColumns(spec.schema)
        if spec.partition_by:
            builder = builder.partitionedBy(*spec.partition_by)
        builder.execute()
