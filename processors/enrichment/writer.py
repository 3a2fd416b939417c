"""``foreachBatch``: one micro-batch, split by tenant, into Delta (events, state tables, _dlq) and then MongoDB.

Effectively once: each Delta write carries txnAppId/txnVersion = (query, batch id), so a batch replayed after a crash
is skipped by Delta; the MongoDB upserts are version-guarded, so replaying them changes nothing. Spark commits the
Kafka offsets to the checkpoint only after this function returns. The assets' health is a second MERGE into
``assets`` in the same batch, under its own txnAppId (``<query>.health``): one appId per table and batch can commit
only once.

The tenants of a batch are written one after the other, or (``enrichment.tenant_parallelism`` > 1) on a bounded pool
of threads, each with its own SparkSession (processors.enrichment.tenant_pool): the batch still ends only when every
tenant has, and fails if any did.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import delta.exceptions as delta_errors
from delta.tables import DeltaTable
from opentelemetry import metrics, trace
from pymongo import MongoClient
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from metalake.kafka import EventProducer
from metalake.settings import Settings
from metalake.telemetry import bind_tenant, extract_context
from processors.enrichment.catalog import register_tenant_tables
from processors.enrichment.changes import auto_classifications, change_events
from processors.enrichment.classify import DEFAULT_RULES
from processors.enrichment.health import (
    HEALTH,
    HEALTH_COLUMNS,
    INCIDENT_COLUMNS,
    INSERT_DEFAULTS,
    IncidentIndex,
    asset_health,
    change_rows,
    mongo_health_update,
)
from processors.enrichment.parse import ParsedRow, foreign_tenant, parse_rows
from processors.enrichment.projection import apply_updates, apply_upserts, spec_upsert
from processors.enrichment.state import ASSETS, INCIDENTS, META, STATE_SPECS, StateSpec, fold
from processors.enrichment.tables import DLQ, EVENTS, TABLES, ensure_tables, source_schema, typed
from processors.enrichment.tenant_pool import TenantPool
from tenants.naming import CHANGES_TOPIC, TenantNames, names_for, unrouted_lake_dir

log = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)
meter = metrics.get_meter(__name__)
events_in = meter.create_counter("metalake.enrichment.events", description="Valid events written to Delta")
dlq_records = meter.create_counter("metalake.enrichment.dlq", description="Records sent to a _dlq table")
auto_tags = meter.create_counter("metalake.enrichment.auto_tags", description="Classifications made by rules")
conflicts = meter.create_counter("metalake.enrichment.merge_conflicts", description="MERGE retried after a conflict")
batch_seconds = meter.create_histogram("metalake.enrichment.batch.duration", unit="s")

CONFLICT_ATTEMPTS = 5
# The exceptions PySpark raises for Delta conflicts subclass these one by one, not their common base.
CONFLICTS = (
    delta_errors.ConcurrentAppendException,
    delta_errors.ConcurrentDeleteDeleteException,
    delta_errors.ConcurrentDeleteReadException,
    delta_errors.ConcurrentTransactionException,
    delta_errors.ConcurrentWriteException,
    delta_errors.DeltaConcurrentModificationException,
    delta_errors.MetadataChangedException,
    delta_errors.ProtocolChangedException,
)

# Hook for fault tests: called between the Delta commit and the MongoDB upsert of a tenant.
AfterDeltaHook = Callable[[str, int], None]


def _newer(s: str, t: str) -> str:
    return f"{s}.version > {t}.version OR ({s}.version = {t}.version AND {s}.event_id > {t}.event_id)"


HEALTH_SOURCE = typed(("urn", *HEALTH_COLUMNS))
# A health row applies unless the held one was computed from newer incident rows (equal: the same one, replayed).
HEALTH_GUARD = (
    "t.health_version IS NULL OR s.health_version > t.health_version"
    " OR (s.health_version = t.health_version AND s.health_event_id >= t.health_event_id)"
)


def event_rows(valid: list[ParsedRow], now: datetime) -> list[tuple[Any, ...]]:
    return [
        (
            r.event_id,
            r.event_type,
            r.source,
            r.subject,
            r.version,
            r.event_time,
            r.data,
            r.traceparent,
            r.topic,
            r.partition,
            r.offset,
            now,
            r.event_time.date() if r.event_time else None,
        )
        for r in valid
    ]


def dlq_rows(invalid: list[ParsedRow], now: datetime) -> list[tuple[Any, ...]]:
    return [
        (
            r.reason,
            r.field,
            r.raw_key,
            r.raw_value,
            r.raw_headers,
            r.topic,
            r.partition,
            r.offset,
            r.kafka_time,
            now,
        )
        for r in invalid
    ]


MAX_SPAN_LINKS = 128


def _link_producers(by_tenant: dict[str | None, list[ParsedRow]]) -> None:
    """Link the batch span to the spans that produced its events (one trace from webhook to store)."""
    span = trace.get_current_span()
    linked = 0
    for rows in by_tenant.values():
        for row in rows:
            if row.traceparent and linked < MAX_SPAN_LINKS:
                ctx = trace.get_current_span(extract_context([("ce_traceparent", row.traceparent.encode())]))
                span.add_link(ctx.get_span_context(), {"event.id": row.event_id or ""})
                linked += 1


def retry_conflicts(commit: Callable[[], object], table: str) -> None:
    """Run a Delta commit again when a concurrent commit won. The priority and bulk queries write the same tables;
    every write here is idempotent (txn ids, version-guarded MERGE, create-if-not-exists), so a rerun is safe."""
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            commit()
            return
        except CONFLICTS:
            if attempt == CONFLICT_ATTEMPTS:
                raise
            conflicts.add(1, {"table": table})
            log.info("enrichment.conflict_retry", extra={"table": table, "attempt": attempt})
            time.sleep(random.uniform(0.05, 0.3) * attempt)  # noqa: S311 - jitter, not security


class StepTimer:
    """Wall time per step of a batch, logged with the batch so slow steps show up without a profiler. Summed over
    the batch's tenants: with tenants written in parallel the steps add up to more than the batch's wall time."""

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self._lock = threading.Lock()  # tenant threads add to the same step

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            elapsed = time.monotonic() - started
            with self._lock:
                self.steps[step] = round(self.steps.get(step, 0.0) + elapsed, 3)


class BatchWriter:
    """The ``foreachBatch`` function. Records are parsed on the driver: a micro-batch is bounded by
    ``maxOffsetsPerTrigger`` and metadata events are small, so this avoids Python worker round trips and leaves Spark
    the work it is for (the Kafka source, checkpoints, Delta commits and MERGE)."""

    def __init__(
        self,
        settings: Settings,
        app_id: str,
        mongo: MongoClient[dict[str, Any]],
        after_delta: AfterDeltaHook | None = None,
        only_tenant: str | None = None,
        changes: EventProducer | None = None,
        tables_lock: threading.Lock | None = None,
        incident_index: IncidentIndex | None = None,
        publish_lock: threading.Lock | None = None,
    ) -> None:
        self._changes = changes
        # EventProducer.publish waits with ``flush``, which is not safe from two threads on one client (one may return
        # before the other's delivery reports ran): one lock per producer, shared by every writer that uses it.
        self._publish_lock = publish_lock or threading.Lock()
        # Shared by the queries of one process: two concurrent creations of a tenant's tables race on the same
        # folders ("location is not empty and not a Delta table"), which is not a retryable Delta conflict.
        self._tables_lock = tables_lock or threading.Lock()
        # Shared by the queries of one process too: its lock serializes the health step, so each health computation
        # reads the incidents table after every earlier one wrote (a later health never holds older incident rows
        # than one it overwrites), and its index of URNs with incidents sees every query's incidents. That guarantee
        # is per tenant (each has its own incidents table), but the lock is per process: tenant threads take turns
        # for the health step and the MongoDB upserts, while their Delta appends and MERGEs overlap.
        self._incidents = incident_index or IncidentIndex()
        self._settings = settings
        self._only_tenant = only_tenant
        self._app_id = app_id
        self._mongo = mongo
        self._after_delta = after_delta
        # A tenant is in one batch task at a time, so its entries are only added by one thread (set.add holds the GIL).
        self._ready_tenants: set[str] = set()
        self._registered_tenants: set[str] = set()
        self._pool: TenantPool[SparkSession] = TenantPool(
            settings.enrichment.tenant_parallelism, lambda base: base.newSession()
        )

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        timer = StepTimer()
        spark = batch_df.sparkSession
        with tracer.start_as_current_span("enrichment.batch", attributes={"batch.id": batch_id}):
            with timer("collect"):
                raw = batch_df.select("key", "value", "headers", "topic", "partition", "offset", "timestamp").collect()
            with timer("parse"):
                by_tenant: dict[str | None, list[ParsedRow]] = {}
                for row in parse_rows(raw):
                    if self._only_tenant is not None and row.tenant != self._only_tenant:
                        row = foreign_tenant(row, self._only_tenant)
                    by_tenant.setdefault(row.tenant, []).append(row)
                _link_producers(by_tenant)

            def task(tenant: str | None) -> Callable[[SparkSession], None]:
                def write(session: SparkSession) -> None:
                    with bind_tenant(tenant):
                        self._write_tenant(session, tenant, by_tenant[tenant], batch_id, timer)

                return write

            self._pool.run(spark, [task(t) for t in sorted(by_tenant, key=lambda t: t or "")])
        elapsed = time.monotonic() - started
        batch_seconds.record(elapsed)
        log.info(
            "enrichment.batch_done",
            extra={
                "batch_id": batch_id,
                "records": len(raw),
                "tenants": len(by_tenant),
                "tenant_parallelism": self._pool.parallelism,
                "seconds": round(elapsed, 3),
                "steps": timer.steps,
            },
        )

    def close(self) -> None:
        """Stop the tenant threads (after the batch they are in, if any)."""
        self._pool.close()

    def _write_tenant(
        self, spark: SparkSession, tenant: str | None, rows: list[ParsedRow], batch_id: int, timer: StepTimer
    ) -> None:
        now = datetime.now(UTC)
        valid = [r for r in rows if r.valid]
        invalid = [r for r in rows if not r.valid]
        if tenant is None:
            with timer("dlq"):
                self._append(
                    spark,
                    dlq_rows(invalid, now),
                    DLQ,
                    str(unrouted_lake_dir(self._settings.lake_root) / "_dlq"),
                    batch_id,
                )
            dlq_records.add(len(invalid), {"tenant": "_unrouted"})
            return
        names = names_for(tenant, self._settings.lake_root)
        if tenant not in self._ready_tenants:
            # Also adds the columns a newer spec has to the tenant's existing tables. Trino reads a Delta table's
            # columns from its log at query time: added columns need no re-registration (a new table is registered
            # by the first batch of the process, below).
            with timer("ensure_tables"), self._tables_lock:
                retry_conflicts(lambda: ensure_tables(spark, names), "*")
            self._ready_tenants.add(tenant)
        with timer("events"):
            self._append(spark, event_rows(valid, now), EVENTS, str(names.delta_path("events")), batch_id)
        if invalid:
            with timer("dlq"):
                self._append(spark, dlq_rows(invalid, now), DLQ, str(names.delta_path("_dlq")), batch_id)
            dlq_records.add(len(invalid), {"tenant": tenant})
            log.warning("enrichment.dead_letters", extra={"batch_id": batch_id, "count": len(invalid)})
        states = [(spec, fold(spec, valid, now)) for spec in STATE_SPECS]
        for spec, folded in states:
            if folded:
                with timer(f"merge_{spec.table}"):
                    self._merge(spark, spec, folded, names, batch_id)
        with self._incidents.lock:
            with timer("health"):
                health = self._health(spark, tenant, names, states, batch_id, now)
            if self._after_delta is not None:
                self._after_delta(tenant, batch_id)
            applied = stale = 0
            with timer("mongo"):
                for spec, folded in states:
                    collection = self._mongo[names.mongo_database][spec.collection]
                    a, st = apply_upserts(collection, map(spec_upsert(spec), folded))
                    applied, stale = applied + a, stale + st
                # After the assets' upserts: a new asset document exists by now and gets its health.
                apply_updates(self._mongo[names.mongo_database][ASSETS.collection], map(mongo_health_update, health))
        if self._changes is not None:
            with timer("changes"):
                published = [e for spec, folded in states for e in change_events(tenant, spec, folded)]
                published += change_events(tenant, HEALTH, change_rows(health))
                with self._publish_lock:
                    self._changes.publish(published, lambda e: CHANGES_TOPIC)
            self._auto_classify(tenant, states[0][1], timer)
        events_in.add(len(valid), {"tenant": tenant})
        log.info(
            "enrichment.tenant_written",
            extra={
                "batch_id": batch_id,
                "events": len(valid),
                "health_rows": len(health),
                "mongo_applied": applied,
                "mongo_stale": stale,
            },
        )
        if tenant not in self._registered_tenants:
            with timer("trino_register"):
                self._register(names)

    def _health(
        self,
        spark: SparkSession,
        tenant: str,
        names: TenantNames,
        states: list[tuple[StateSpec, list[dict[str, Any]]]],
        batch_id: int,
        now: datetime,
    ) -> list[dict[str, Any]]:
        """Recompute the health of the assets of this batch's incidents, and of this batch's assets that have incident
        rows, from the incidents table as committed (this batch's MERGE included); MERGE it into ``assets`` and
        return the rows.

        Assets with incidents are included: an incident may name an asset the catalog learns of later (the health
        MERGE matches no row then), and that asset's first upsert must pick its incidents up."""
        incidents_table = spark.read.format("delta").load(str(names.delta_path(INCIDENTS.table)))
        if not self._incidents.loaded(tenant):
            self._incidents.load(tenant, (r["urn"] for r in incidents_table.select("urn").distinct().collect()))
        by_table = {spec.table: [r["urn"] for r in folded] for spec, folded in states}
        urns = self._incidents.to_compute(tenant, by_table[INCIDENTS.table], by_table[ASSETS.table])
        if not urns:
            return []
        incidents = incidents_table.where(F.col("urn").isin(urns)).select(*INCIDENT_COLUMNS).collect()
        rows = asset_health((r.asDict() for r in incidents), now)
        if not rows:
            return []
        source = spark.createDataFrame([tuple(r[c] for c in HEALTH_SOURCE.fieldNames()) for r in rows], HEALTH_SOURCE)
        app_id = f"{self._app_id}.health"
        conf = spark.conf

        def merge() -> None:
            conf.set("spark.databricks.delta.write.txnAppId", app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            (
                DeltaTable.forPath(spark, str(names.delta_path(ASSETS.table)))
                .alias("t")
                .merge(source.alias("s"), "t.urn = s.urn")
                .whenMatchedUpdate(condition=HEALTH_GUARD, set={c: F.col(f"s.{c}") for c in HEALTH_COLUMNS})
                .execute()
            )

        conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
        retry_conflicts(merge, "assets.health")
        return rows

    def _auto_classify(self, tenant: str, assets: list[dict[str, Any]], timer: StepTimer) -> None:
        """Publish classification events for the batch's columns that the rules tag. They come back through the
        pipeline like any event; the classifications state never lets them overwrite a person's decision."""
        enrichment = self._settings.enrichment
        if not enrichment.auto_classify or self._changes is None:
            return
        with timer("auto_classify"):
            events = auto_classifications(tenant, assets, DEFAULT_RULES, enrichment.pii_terms.get(tenant, ()))
            if events:
                names = names_for(tenant, self._settings.lake_root, dedicated=self._only_tenant is not None)
                with self._publish_lock:
                    self._changes.publish(events, lambda e: names.priority_topic)
                auto_tags.add(len(events), {"tenant": tenant})

    def _append(
        self, spark: SparkSession, rows: list[tuple[Any, ...]], schema: StructType, path: str, batch_id: int
    ) -> None:
        if not rows:
            return
        frame = spark.createDataFrame(rows, schema)
        retry_conflicts(
            lambda: (
                frame.write.format("delta")
                .mode("append")
                .option("txnAppId", self._app_id)
                .option("txnVersion", batch_id)
                .save(path)
            ),
            path,
        )

    def _merge(
        self, spark: SparkSession, spec: StateSpec, rows: list[dict[str, Any]], names: TenantNames, batch_id: int
    ) -> None:
        source = spark.createDataFrame([tuple(r[c] for c in spec.columns) for r in rows], source_schema(spec))
        # MERGE has no writer options: Delta reads the idempotency pair from the session (reset after the write).
        conf = spark.conf
        conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
        update: dict[str, str | Column] = {}
        for c in spec.fields:
            s_col, t_col = F.col(f"s.{c}"), F.col(f"t.{c}")
            # Carried fields keep the old value when the event left them out; a removal keeps every value.
            update[c] = (
                F.coalesce(s_col, t_col) if c in spec.carried else F.when(F.col("s.deleted"), t_col).otherwise(s_col)
            )
        update.update({c: F.col(f"s.{c}") for c in META})
        # Named columns, not INSERT *: the table may hold more columns than the spec (derived ones, or ones a newer
        # job added), which then start null or at their defaults.
        insert: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in spec.columns}
        if spec is ASSETS:
            insert.update({c: F.lit(v) for c, v in INSERT_DEFAULTS.items()})
        on = " AND ".join(f"t.{k} = s.{k}" for k in spec.key)
        condition = _newer("s", "t")
        if spec.protect_human:
            # A removal always applies (it keeps the held values, so a person's tag stays theirs as a tombstone).
            auto_over_human = "coalesce(t.source, '') = 'human' AND coalesce(s.source, '') = 'auto'"
            condition = f"({condition}) AND (s.deleted OR NOT ({auto_over_human}))"

        def merge() -> None:
            # The txn confs are consumed by each attempt (auto-reset): set them every time.
            conf.set("spark.databricks.delta.write.txnAppId", self._app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            (
                DeltaTable.forPath(spark, str(names.delta_path(spec.table)))
                .alias("t")
                .merge(source.alias("s"), on)
                .whenMatchedUpdate(condition=condition, set=update)
                .whenNotMatchedInsert(values=insert)
                .execute()
            )

        retry_conflicts(merge, spec.table)

    def _register(self, names: TenantNames) -> None:
        try:
            registered = register_tenant_tables(self._settings, names, tuple(t.name for t in TABLES))
        except Exception as exc:  # noqa: BLE001 - Trino being down must not stop ingestion; retried next batch
            log.warning("enrichment.trino_register_failed", extra={"error": f"{type(exc).__name__}: {exc}"})
            return
        self._registered_tenants.add(names.tenant_id)
        if registered:
            log.info("enrichment.trino_registered", extra={"tables": registered})
