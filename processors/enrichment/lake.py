"""The lake query's ``foreachBatch``: one micro-batch of both event topics into Delta, once per table, whatever the
number of tenants in it.

The record work runs on executors (``rows``: parse, fold, health, through ``mapInArrow``); the driver collects only a
summary (tenants, valid and dead-letter counts, which state tables have rows). Writes: ``events`` (append), ``_dlq``
(append), one MERGE per state table with rows (newest (version, event id) wins), side by side (``fanout``:
``spark.commit_parallelism`` at a time, each MERGE in a Spark session of its own), then, once the assets and
incidents MERGEs returned, the assets' health (a MERGE of the health columns, from the incidents table as committed).
The batch returns once every commit returned; any failure fails it. Each carries txnAppId/txnVersion = (query,
batch id) (the health MERGE ``<query>.health``: one appId per table and batch commits once), so a batch replayed after
a crash commits nothing twice; Spark records the Kafka offsets only after this returns.

A pooled query writes the shared tables, its MERGEs matching on the tenant columns with a literal predicate on the
batch's buckets (partition pruning, and disjoint conflict sets for a concurrent writer of other buckets); a
dedicated tenant's query writes the tenant's own tables. MongoDB is the projection queries' (``projector``).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from functools import partial
from typing import Any

from delta.tables import DeltaTable
from opentelemetry import trace
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

from metalake.s3 import lake_storage_options
from metalake.telemetry.metrics import BATCH_STEP
from processors.enrichment import freshness
from processors.enrichment.admission import TenantAdmission, count_dropped
from processors.enrichment.commits import StepTimer, retry_conflicts
from processors.enrichment.fanout import Commit, CommitSessions, run_commits, spark_thread_setup
from processors.enrichment.health import HEALTH_COLUMNS, INCIDENT_COLUMNS, INSERT_DEFAULTS, asset_health
from processors.enrichment.rows import (
    PARSED_COLUMNS,
    arrow_schema,
    fold_batches,
    folded_columns,
    parse_batches,
)
from processors.enrichment.settings import StreamSettings
from processors.enrichment.single_writer import NO_FENCE, NoWriterLeases, WriterLeases, s3_table
from processors.enrichment.state import ASSETS, INCIDENTS, META, STATE_SPECS, StateSpec
from processors.enrichment.summary import BatchSummary, kept_rows
from processors.enrichment.tables import DLQ, EVENTS, SQL_TYPES, Layout, ensure_tables, spark_schema
from tenants.naming import tenant_bucket

log = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)

KAFKA_COLUMNS = ("key", "value", "headers", "topic", "partition", "offset", "timestamp")
PARSED_SPARK = spark_schema(PARSED_COLUMNS)
FOLDED_COLUMNS = folded_columns(SQL_TYPES)
FOLDED_ARROW = arrow_schema(FOLDED_COLUMNS)
FOLDED_SPARK = spark_schema(FOLDED_COLUMNS)
HEALTH_OUT = (
    ("tenant_id", "string"),
    ("tenant_bucket", "int"),
    ("urn", "string"),
    *tuple((c, SQL_TYPES[c]) for c in HEALTH_COLUMNS),
)
HEALTH_SPARK = spark_schema(HEALTH_OUT)
# A health row applies unless the held one was computed from newer incident rows (equal: the same one, replayed).
HEALTH_GUARD = (
    "t.health_version IS NULL OR s.health_version > t.health_version"
    " OR (s.health_version = t.health_version AND s.health_event_id >= t.health_event_id)"
)

# Hook for fault tests: called after the batch's Delta commits, before the batch returns (offsets not yet recorded).
AfterLakeHook = Callable[[int], None]
# Told the tenants of each batch (the job registers new ones in Trino off the batch's thread).
TenantsSeen = Callable[[set[str]], None]


def _newer(s: str, t: str) -> str:
    return f"{s}.version > {t}.version OR ({s}.version = {t}.version AND {s}.event_id > {t}.event_id)"


class LakeWriter:
    def __init__(  # noqa: PLR0913
        self,
        settings: StreamSettings,
        app_id: str,
        layout: Layout,
        *,
        only_tenant: str | None = None,
        after_lake: AfterLakeHook | None = None,
        tenants_seen: TenantsSeen | None = None,
        admission: TenantAdmission | None = None,
        leases: WriterLeases | None = None,
    ) -> None:
        self._settings = settings
        # On S3 each batch holds its tables' writer leases (``single_writer``); a local lake takes none.
        self._leases = leases or NoWriterLeases()
        self._fence = NO_FENCE
        # None: every tenant's events are written (tests and benchmarks that run without a control plane).
        self._admission = admission
        self._app_id = app_id
        self._query = freshness.query_label(app_id)  # the metrics' label
        self._layout = layout
        self._only_tenant = only_tenant
        self._after_lake = after_lake
        self._tenants_seen = tenants_seen
        # (tenant, urn) of every asset with incident rows: a batch of asset upserts computes health only for those
        # (a bulk batch holds thousands of columns, nearly always without incidents). Loaded from the table at start.
        self._incident_urns: set[tuple[str, str]] = set()
        self._sessions = CommitSessions()  # the MERGEs' own sessions, when they run side by side

    def prepare(self, spark: SparkSession) -> dict[str, list[str]]:
        """Create the tables (and add columns a newer job has) before the query starts; return the columns added."""
        added: dict[str, list[str]] = {}
        with self._leases.holding([path for _, path in self._layout.tables()]):  # creating a table commits
            added.update(ensure_tables(self._layout.tables(), lake_storage_options(self._settings)))
        incidents = spark.read.format("delta").load(self._layout.path(INCIDENTS.table))
        self._incident_urns = {
            (r["tenant_id"], r["urn"]) for r in incidents.select(*self._tenant_or_literal(), "urn").distinct().collect()
        }
        return added

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        timer = StepTimer(self._query)
        now = datetime.now(UTC)
        spark = batch_df.sparkSession
        with tracer.start_as_current_span("enrichment.lake_batch", attributes={"batch.id": batch_id}):
            cached = (
                batch_df.select(*KAFKA_COLUMNS)
                .mapInArrow(parse_batches(self._only_tenant), PARSED_SPARK)
                .persist(StorageLevel.MEMORY_AND_DISK)
            )
            parsed = cached
            folded: DataFrame | None = None
            held = ExitStack()  # the writer leases of the batch's tables on S3, released when it ends
            try:
                with timer("parse"):
                    summary = BatchSummary.of(parsed)
                if self._admission is not None and summary.tenants:
                    with timer("admission"):
                        dropped = self._admission.refused(summary.tenants)
                    if dropped:
                        count_dropped(summary.records_of(dropped), self._app_id)
                        parsed = parsed.where(kept_rows(F.col("tenant_id"), dropped))
                        summary = summary.without(dropped)
                if self._tenants_seen is not None and summary.tenants:
                    # Before the writes: a new tenant's views are being made while its rows are committed.
                    self._tenants_seen(set(summary.tenants))
                held.enter_context(self._holding(timer))
                if summary.state_tables:
                    with timer("fold"):
                        folded = self._fold(parsed, now)
                with timer("commits"):  # the wall time of all the batch's commits, side by side or not
                    run_commits(
                        self._commits(spark, parsed, folded, summary, now, batch_id, timer),
                        self._settings.spark.commit_parallelism,
                        spark_thread_setup(spark),
                    )
                if self._after_lake is not None:
                    self._after_lake(batch_id)
            finally:
                held.close()
                cached.unpersist()
                if folded is not None:
                    folded.unpersist()
        elapsed = time.monotonic() - started
        BATCH_STEP.record(elapsed, {"query": self._query, "step": "batch"})
        log.info(
            "enrichment.lake_batch_done",
            extra={
                "query": self._app_id,
                "batch_id": batch_id,
                "events": summary.valid,
                "dead_letters": summary.dead + summary.unrouted,
                "tenants": len(summary.tenants),
                "seconds": round(elapsed, 3),
                "steps": timer.steps,
            },
        )

    # -- writes ------------------------------------------------------------------------------------------------

    @contextmanager
    def _holding(self, timer: StepTimer) -> Iterator[None]:
        """The batch's writes hold the writer leases of the query's tables on S3, released at the batch's end so a
        lake command gets in before the next one (``single_writer``); no lease on a local lake."""
        with ExitStack() as held:
            if s3_table(self._layout.lake_root) is not None:  # every table of the query is under its root
                with timer("writer_lease"):  # the wait for a lake command between two batches shows here
                    paths = [path for _, path in self._layout.tables()]
                    self._fence = held.enter_context(self._leases.holding(paths))
            try:
                yield
            finally:
                self._fence = NO_FENCE

    def _tenant(self) -> list[Column]:
        return [F.col(c) for c in self._layout.tenant_columns]

    def _append(self, frame: DataFrame, path: str, batch_id: int) -> None:
        def attempt() -> None:
            self._fence.check()
            frame.write.format("delta").mode("append").option("txnAppId", self._app_id).option(
                "txnVersion", batch_id
            ).save(path)

        retry_conflicts(attempt, path)

    def _fold(self, parsed: DataFrame, now: datetime) -> DataFrame:
        folded = (
            parsed.where(F.col("state_table").isNotNull())
            .repartition("tenant_id", "state_table", "state_key")
            .mapInArrow(fold_batches(FOLDED_ARROW, now), FOLDED_SPARK)
            .persist(StorageLevel.MEMORY_AND_DISK)
        )
        if self._settings.spark.commit_parallelism > 1:
            folded.count()  # folded once here, not by each of the MERGEs that start together and read it
        return folded

    def _commits(  # noqa: PLR0913
        self,
        spark: SparkSession,
        parsed: DataFrame,
        folded: DataFrame | None,
        summary: BatchSummary,
        now: datetime,
        batch_id: int,
        timer: StepTimer,
    ) -> list[Commit]:
        """The batch's commits, each timed as a step of its own (steps overlap when they run side by side), in the
        order they run one after the other. Each MERGE gets a session of its own when they run side by side; the
        health MERGE follows the assets and incidents MERGEs (it reads incidents as committed, and writes assets)."""

        def step(name: str, write: Callable[[], None], after: tuple[str, ...] = ()) -> Commit:
            def run() -> None:
                with timer(name):
                    write()

            return Commit(name, run, after)

        def session(table: str) -> SparkSession:
            parallel = self._settings.spark.commit_parallelism > 1
            return self._sessions.session(spark, table) if parallel else spark

        commits: list[Commit] = []
        if summary.valid:
            commits.append(step("events", partial(self._append_events, parsed, summary, now, batch_id)))
        if summary.dead:
            commits.append(step("dlq", partial(self._append_dead_letters, parsed, summary, now, batch_id)))
        if summary.unrouted:
            commits.append(step("dlq_unrouted", partial(self._append_unrouted, parsed, summary, now, batch_id)))
        if folded is None:
            return commits
        for spec in STATE_SPECS:
            if spec.table in summary.state_tables:
                merge = partial(self._merge, session(spec.table), spec, folded, summary, batch_id)
                commits.append(step(f"merge_{spec.table}", merge))
        health = partial(self._health, session("health"), folded, summary, now, batch_id)
        return [*commits, step("health", health, after=(f"merge_{ASSETS.table}", f"merge_{INCIDENTS.table}"))]

    def _append_events(self, parsed: DataFrame, summary: BatchSummary, now: datetime, batch_id: int) -> None:
        columns = [F.lit(now).alias(c) if c == "ingested_at" else F.col(c) for c in EVENTS.fieldNames()]
        self._append(parsed.where("valid").select(*self._tenant(), *columns), self._layout.path("events"), batch_id)
        # Types with no state table are readable once in ``events``; the others once their table's MERGE returned.
        freshness.record_counts(summary.kafka_ms(None), freshness.DELTA, self._query)

    def _append_dead_letters(self, parsed: DataFrame, summary: BatchSummary, now: datetime, batch_id: int) -> None:
        columns = [F.lit(now).alias(c) if c == "ingested_at" else F.col(c) for c in DLQ.fieldNames()]
        dead = parsed.where("NOT valid AND tenant_id IS NOT NULL")
        self._append(dead.select(*self._tenant(), *columns), self._layout.path("_dlq"), batch_id)
        freshness.count_dead_letters(summary.dead, "invalid")
        log.warning("enrichment.dead_letters", extra={"batch_id": batch_id, "count": summary.dead})

    def _append_unrouted(self, parsed: DataFrame, summary: BatchSummary, now: datetime, batch_id: int) -> None:
        columns = [F.lit(now).alias(c) if c == "ingested_at" else F.col(c) for c in DLQ.fieldNames()]
        self._append(parsed.where("tenant_id IS NULL").select(*columns), self._layout.unrouted_dlq, batch_id)
        freshness.count_dead_letters(summary.unrouted, "unrouted")

    def _on(self, keys: tuple[str, ...], summary: BatchSummary) -> str:
        on = [f"t.{k} = s.{k}" for k in (*self._layout.tenant_columns, *keys)]
        if self._layout.shared:
            # A literal on the partition column: MERGE reads and rewrites only the batch's buckets.
            on.append(f"t.tenant_bucket IN ({', '.join(map(str, sorted(summary.buckets)))})")
        return " AND ".join(on)

    def _merge(
        self, spark: SparkSession, spec: StateSpec, folded: DataFrame, summary: BatchSummary, batch_id: int
    ) -> None:
        tenant_columns = self._layout.tenant_columns
        source = folded.where(F.col("state_table") == spec.table).select(*tenant_columns, *spec.columns)
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
        insert: dict[str, str | Column] = {c: F.col(f"s.{c}") for c in (*tenant_columns, *spec.columns)}
        if spec is ASSETS:
            insert.update({c: F.lit(v) for c, v in INSERT_DEFAULTS.items()})
        condition = _newer("s", "t")
        if spec.protect_human:
            # A removal always applies (it keeps the held values, so a person's tag stays theirs as a tombstone).
            auto_over_human = "coalesce(t.source, '') = 'human' AND coalesce(s.source, '') = 'auto'"
            condition = f"({condition}) AND (s.deleted OR NOT ({auto_over_human}))"
        self._commit_merge(
            spark,
            spec.table,
            self._app_id,
            batch_id,
            lambda table: (
                table.alias("t")
                .merge(source.alias("s"), self._on(spec.key, summary))
                .whenMatchedUpdate(condition=condition, set=update)
                .whenNotMatchedInsert(values=insert)
                .execute()
            ),
        )
        freshness.record_counts(summary.kafka_ms(spec.table), freshness.DELTA, self._query)

    def _commit_merge(
        self,
        spark: SparkSession,
        table: str,
        app_id: str,
        batch_id: int,
        merge: Callable[[DeltaTable], object],
    ) -> None:
        # MERGE has no writer options: Delta reads the idempotency pair from the session's conf, consumed by each
        # attempt (auto-reset), so it is set before every one. No other MERGE runs in ``spark`` meanwhile: side by side,
        # each table's MERGE has a session of its own (``fanout.CommitSessions``).
        conf = spark.conf
        conf.set("spark.databricks.delta.write.txnVersion.autoReset.enabled", "true")
        # Delta refuses "none" for a cached source (checkSourcePlanIsNotCached), and the folded rows are cached so
        # that the MERGEs do not fold again: "auto" unless a benchmark says otherwise.
        conf.set("spark.databricks.delta.merge.materializeSource", self._settings.spark.merge_materialize_source)
        path = self._layout.path(table)

        def attempt() -> None:
            self._fence.check()
            conf.set("spark.databricks.delta.write.txnAppId", app_id)
            conf.set("spark.databricks.delta.write.txnVersion", str(batch_id))
            merge(DeltaTable.forPath(spark, path))

        retry_conflicts(attempt, table)

    def _health(
        self,
        spark: SparkSession,
        folded: DataFrame,
        summary: BatchSummary,
        now: datetime,
        batch_id: int,
    ) -> None:
        """Recompute the health of the batch's incidents' assets, and of the batch's assets that have incident rows,
        from the incidents table as committed (this batch's MERGE included), and MERGE it into ``assets``.

        Assets with incidents are included: an incident may name an asset the catalog learns of later (the health
        MERGE matches no row then), and that asset's first upsert must pick its incidents up. Incidents are few
        beside assets, so the affected URNs and their incident rows come to the driver; the batch's assets do not
        (they are matched against the known incident URNs on the executors)."""
        if INCIDENTS.table not in summary.state_tables and not (
            ASSETS.table in summary.state_tables and summary.tenants & {t for t, _ in self._incident_urns}
        ):
            return
        key = F.concat_ws("|", "tenant_id", "urn")
        with_incidents = F.col("state_table") == INCIDENTS.table
        if self._incident_urns:
            known = [f"{t}|{u}" for t, u in self._incident_urns]
            with_incidents = with_incidents | ((F.col("state_table") == ASSETS.table) & key.isin(known))
        affected = {
            (r["tenant_id"], r["urn"])
            for r in folded.where(with_incidents).select("tenant_id", "urn").distinct().collect()
        }
        self._incident_urns |= {(t, u) for t, u in affected}
        if not affected:
            return
        incidents = spark.read.format("delta").load(self._layout.path(INCIDENTS.table))
        if self._layout.shared:
            incidents = incidents.where(F.col("tenant_bucket").isin(sorted(summary.buckets)))
        wanted = incidents.select(*self._tenant_or_literal(), *INCIDENT_COLUMNS).where(
            F.concat_ws("|", "tenant_id", "urn").isin([f"{t}|{u}" for t, u in sorted(affected)])
        )
        by_tenant: dict[str, list[dict[str, Any]]] = {}
        for row in wanted.collect():
            by_tenant.setdefault(row["tenant_id"], []).append(row.asDict())
        rows = [
            (tenant, tenant_bucket(tenant), h["urn"], *(h[c] for c in HEALTH_COLUMNS))
            for tenant, incident_rows in sorted(by_tenant.items())
            for h in asset_health(incident_rows, now)
        ]
        if not rows:
            return
        source = spark.createDataFrame(rows, HEALTH_SPARK).select(*self._layout.tenant_columns, "urn", *HEALTH_COLUMNS)
        self._commit_merge(
            spark,
            ASSETS.table,
            f"{self._app_id}.health",
            batch_id,
            lambda table: (
                table.alias("t")
                .merge(source.alias("s"), self._on(("urn",), summary))
                .whenMatchedUpdate(condition=HEALTH_GUARD, set={c: F.col(f"s.{c}") for c in HEALTH_COLUMNS})
                .execute()
            ),
        )

    def _tenant_or_literal(self) -> list[Column]:
        """The tenant columns, or for a dedicated tenant's own tables (which have none) its id and bucket as
        literals, so the health step joins the same way on both layouts."""
        if self._layout.tenant is None:
            return self._tenant()
        own = self._layout.tenant.tenant_id
        return [F.lit(own).alias("tenant_id"), F.lit(tenant_bucket(own)).cast("int").alias("tenant_bucket")]


__all__ = ["AfterLakeHook", "BatchSummary", "LakeWriter"]
