"""``foreachBatch``: one micro-batch, split by tenant, into Delta (events, assets, _dlq) and then MongoDB.

Effectively once: each Delta write carries txnAppId/txnVersion = (query, batch id), so a batch replayed after a crash
is skipped by Delta; the MongoDB upserts are version-guarded, so replaying them changes nothing. Spark commits the
Kafka offsets to the checkpoint only after this function returns.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from delta.tables import DeltaTable
from opentelemetry import metrics, trace
from pymongo import MongoClient
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from pyspark.sql.window import Window

from metalake.settings import Settings
from metalake.telemetry import bind_tenant
from processors.enrichment.catalog import register_tenant_tables
from processors.enrichment.parse import ASSET_TYPES, parse_partition
from processors.enrichment.projection import apply_upserts, guarded_upsert
from processors.enrichment.tables import TABLES, ensure_tables
from tenants.naming import TenantNames, names_for, unrouted_lake_dir

log = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)
meter = metrics.get_meter(__name__)
events_in = meter.create_counter("metalake.enrichment.events", description="Valid events written to Delta")
dlq_records = meter.create_counter("metalake.enrichment.dlq", description="Records sent to a _dlq table")
batch_seconds = meter.create_histogram("metalake.enrichment.batch.duration", unit="s")

PARSED_SCHEMA = StructType(
    [
        StructField("tenant", StringType()),
        StructField("valid", BooleanType()),
        StructField("event_id", StringType()),
        StructField("event_type", StringType()),
        StructField("source", StringType()),
        StructField("subject", StringType()),
        StructField("event_time", TimestampType()),
        StructField("version", LongType()),
        StructField("data", StringType()),
        StructField("reason", StringType()),
        StructField("field", StringType()),
        StructField("raw_key", BinaryType()),
        StructField("raw_value", BinaryType()),
        StructField("raw_headers", StringType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("kafka_time", TimestampType()),
        StructField("traceparent", StringType()),
    ]
)

ASSET_DATA = StructType(
    [
        StructField("kind", StringType()),
        StructField("name", StringType()),
        StructField("description", StringType()),
        StructField("data_type", StringType()),
        StructField("owners", ArrayType(StringType())),
        StructField("properties", MapType(StringType(), StringType())),
    ]
)
# Fields an upsert may leave out: the asset keeps what it had (coalesce in Delta, $set of non-null in MongoDB).
CARRIED = ("kind", "name", "platform", "qualified_name", "description", "data_type", "owners", "properties")

# Hook for fault tests: called between the Delta commit and the MongoDB upsert of a tenant.
AfterDeltaHook = Callable[[str, int], None]


def _newer(s: str, t: str) -> str:
    return f"{s}.version > {t}.version OR ({s}.version = {t}.version AND {s}.event_id > {t}.event_id)"


def latest_assets(valid: DataFrame) -> DataFrame:
    """One row per URN: the newest (version, event_id) event, each carried field folded from older ones in the batch."""
    assets = (
        valid.where(F.col("event_type").isin(*ASSET_TYPES))
        .withColumn("d", F.from_json("data", ASSET_DATA))
        .select(
            F.col("subject").alias("urn"),
            "d.kind",
            "d.name",
            F.regexp_extract("subject", r"^urn:metalake:([^:]+):", 1).alias("platform"),
            F.url_decode(
                F.regexp_replace(F.regexp_extract("subject", r"^urn:metalake:[^:]+:[^/]+/(.*)$", 1), "/", ".")
            ).alias("qualified_name"),
            "d.description",
            "d.data_type",
            "d.owners",
            "d.properties",
            (F.col("event_type") == "io.metalake.asset.deleted.v1").alias("deleted"),
            "version",
            "event_id",
            "event_time",
        )
    )
    ordered = Window.partitionBy("urn").orderBy("version", "event_id")
    whole = ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)
    folded: list[Column | str] = [F.last(c, ignorenulls=True).over(whole).alias(c) for c in CARRIED]
    newest_first = Window.partitionBy("urn").orderBy(F.desc("version"), F.desc("event_id"))
    return (
        assets.select(
            "urn", *folded, "deleted", "version", "event_id", "event_time", F.row_number().over(newest_first).alias("_r")
        )
        .where("_r = 1")
        .drop("_r")
        .withColumn("updated_at", F.current_timestamp())
    )


class BatchWriter:
    def __init__(
        self,
        settings: Settings,
        app_id: str,
        mongo: MongoClient[dict[str, Any]],
        after_delta: AfterDeltaHook | None = None,
    ) -> None:
        self._settings = settings
        self._app_id = app_id
        self._mongo = mongo
        self._after_delta = after_delta
        self._ready_tenants: set[str] = set()
        self._registered_tenants: set[str] = set()

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        spark = batch_df.sparkSession
        with tracer.start_as_current_span("enrichment.batch", attributes={"batch.id": batch_id}):
            raw = batch_df.select("key", "value", "headers", "topic", "partition", "offset", "timestamp")
            parsed = spark.createDataFrame(raw.rdd.mapPartitions(parse_partition), PARSED_SCHEMA).persist()
            try:
                tenants = [r[0] for r in parsed.select("tenant").distinct().collect()]
                for tenant in sorted(tenants, key=lambda t: t or ""):
                    with bind_tenant(tenant):
                        self._write_tenant(spark, parsed, tenant, batch_id)
            finally:
                parsed.unpersist()
        elapsed = time.monotonic() - started
        batch_seconds.record(elapsed)
        log.info("enrichment.batch_done", extra={"batch_id": batch_id, "tenants": len(tenants), "seconds": round(elapsed, 3)})

    def _write_tenant(self, spark: SparkSession, parsed: DataFrame, tenant: str | None, batch_id: int) -> None:
        if tenant is None:
            rows = parsed.where(F.col("tenant").isNull())
            self._write_dlq(rows, str(unrouted_lake_dir(self._settings.lake_root) / "_dlq"), batch_id, "_unrouted")
            return
        names = names_for(tenant, self._settings.lake_root)
        if tenant not in self._ready_tenants:
            ensure_tables(spark, names)
            self._ready_tenants.add(tenant)
        rows = parsed.where(F.col("tenant") == tenant)
        valid = rows.where("valid")
        n_valid = self._append_events(valid, names, batch_id)
        self._write_dlq(rows.where("NOT valid"), str(names.delta_path("_dlq")), batch_id, tenant)
        latest = latest_assets(valid).persist()
        try:
            if not latest.isEmpty():
                self._merge_assets(spark, latest, names, batch_id)
            if self._after_delta is not None:
                self._after_delta(tenant, batch_id)
            applied, stale = self._project(latest, names)
        finally:
            latest.unpersist()
        events_in.add(n_valid, {"tenant": tenant})
        log.info(
            "enrichment.tenant_written",
            extra={"batch_id": batch_id, "events": n_valid, "mongo_applied": applied, "mongo_stale": stale},
        )
        self._register(names)

    def _append_events(self, valid: DataFrame, names: TenantNames, batch_id: int) -> int:
        events = valid.select(
            "event_id",
            "event_type",
            "source",
            "subject",
            "version",
            "event_time",
            "data",
            "traceparent",
            F.col("topic").alias("kafka_topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
            F.current_timestamp().alias("ingested_at"),
            F.to_date("event_time").alias("event_date"),
        )
        count = events.count()
        if count:
            (
                events.write.format("delta")
                .mode("append")
                .option("txnAppId", self._app_id)
                .option("txnVersion", batch_id)
                .save(str(names.delta_path("events")))
            )
        return count

    def _write_dlq(self, invalid: DataFrame, path: str, batch_id: int, tenant: str) -> None:
        dlq = invalid.select(
            "reason",
            "field",
            "raw_key",
            "raw_value",
            "raw_headers",
            F.col("topic").alias("kafka_topic"),
            F.col("partition").alias("kafka_partition"),
            F.col("offset").alias("kafka_offset"),
            "kafka_time",
            F.current_timestamp().alias("ingested_at"),
        )
        count = dlq.count()
        if not count:
            return
        (
            dlq.write.format("delta")
            .mode("append")
            .option("txnAppId", self._app_id)
            .option("txnVersion", batch_id)
            .save(path)
        )
        dlq_records.add(count, {"tenant": tenant})
        log.warning("enrichment.dead_letters", extra={"batch_id": batch_id, "count": count, "dlq": path})

    def _merge_assets(self, spark: SparkSession, latest: DataFrame, names: TenantNames, batch_id: int) -> None:
        # MERGE has no writer options: Delta reads the idempotency pair from the session (reset after the write).
        conf = spark.conf
        conf.set("spark.databricks.delta.write.txnAppId", self._app_id)
        conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
        conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
        update = {c: F.coalesce(F.col(f"s.{c}"), F.col(f"t.{c}")) for c in CARRIED}
        update.update({c: F.col(f"s.{c}") for c in ("deleted", "version", "event_id", "event_time", "updated_at")})
        (
            DeltaTable.forPath(spark, str(names.delta_path("assets")))
            .alias("t")
            .merge(latest.alias("s"), "t.urn = s.urn")
            .whenMatchedUpdate(condition=_newer("s", "t"), set=update)
            .whenNotMatchedInsertAll()
            .execute()
        )

    def _project(self, latest: DataFrame, names: TenantNames) -> tuple[int, int]:
        collection = self._mongo[names.mongo_database]["assets"]
        ops = (
            guarded_upsert(
                row["urn"],
                row["version"],
                row["event_id"],
                {k: v for k, v in row.asDict(recursive=True).items() if k not in ("urn", "version", "event_id")},
            )
            for row in latest.toLocalIterator()
        )
        return apply_upserts(collection, ops)

    def _register(self, names: TenantNames) -> None:
        if names.tenant_id in self._registered_tenants:
            return
        try:
            registered = register_tenant_tables(self._settings, names, tuple(t.name for t in TABLES))
        except Exception as exc:  # noqa: BLE001 - Trino being down must not stop ingestion; retried next batch
            log.warning("enrichment.trino_register_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            return
        self._registered_tenants.add(names.tenant_id)
        if registered:
            log.info("enrichment.trino_registered", extra={"tables": registered})
