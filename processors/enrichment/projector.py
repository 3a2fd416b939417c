"""The projection queries' ``foreachBatch``: one micro-batch of one event topic into MongoDB, then ``metalake.changes``.

Its own query (per topic class, with its own checkpoint and a short trigger) so MongoDB never waits behind the lake's
Delta commits, and the priority topic never behind a bulk backlog. Per tenant of the batch: fold the events per state
(``state.fold``), version-guarded upserts (``projection``), the assets' health from the incidents MongoDB holds, then
the changes and the automatic classifications are published, and only then does the batch return (Spark records the
offsets after that). A replay re-applies nothing (the guards) and republishes identical change ids.

Records are parsed here on the driver: a projection batch is small (the trigger is short) and MongoDB is written from
the driver anyway. Dead letters are the lake query's: invalid records are skipped here.

The tenants of a batch are written on a small thread pool (``spark.projection_workers``): tenants live in databases
of their own, so their writes are independent, while one tenant's writes stay in order on one thread. A batch's
changes and automatic classifications are then published in one call (one wait for Kafka's acknowledgements, not
one per tenant).
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opentelemetry import metrics, trace
from pymongo import MongoClient
from pyspark.sql import DataFrame

from metalake.events import CloudEvent
from metalake.kafka import EventProducer
from metalake.mongo import while_unreachable
from metalake.telemetry import bind_tenant
from metalake.telemetry.metrics import BATCH_STEP
from processors.enrichment import freshness
from processors.enrichment.admission import TenantAdmission, count_dropped
from processors.enrichment.changes import auto_classifications, change_events
from processors.enrichment.classify import DEFAULT_RULES
from processors.enrichment.commits import StepTimer
from processors.enrichment.health import (
    HEALTH,
    INCIDENT_COLUMNS,
    IncidentIndex,
    asset_health,
    change_rows,
    mongo_health_update,
)
from processors.enrichment.parse import ParsedRow, parse_rows
from processors.enrichment.projection import apply_updates, apply_upserts, spec_upsert
from processors.enrichment.settings import StreamSettings
from processors.enrichment.state import ASSETS, INCIDENTS, STATE_SPECS, fold
from processors.enrichment.tracing import EventSpans, SpanBudget
from tenants.naming import CHANGES_TOPIC, names_for

log = logging.getLogger(__name__)
tracer = trace.get_tracer(__name__)
meter = metrics.get_meter(__name__)
auto_tags = meter.create_counter("metalake.enrichment.auto_tags", description="Classifications made by rules")

# Hook for fault tests: called after a tenant's MongoDB writes, before its changes are published.
AfterMongoHook = Callable[[str, int], None]


@dataclass(frozen=True)
class _Written:
    """One tenant's part of a batch once MongoDB holds it: what to announce, and its folded assets to classify."""

    changes: list[CloudEvent]
    assets: list[dict[str, Any]]
    priority_topic: str


class ProjectionWriter:
    def __init__(  # noqa: PLR0913
        self,
        settings: StreamSettings,
        name: str,
        mongo: MongoClient[dict[str, Any]],
        changes: EventProducer,
        incidents: IncidentIndex,
        *,
        only_tenant: str | None = None,
        publish_lock: threading.Lock | None = None,
        after_mongo: AfterMongoHook | None = None,
        admission: TenantAdmission | None = None,
    ) -> None:
        self._settings = settings
        # None: every tenant's events are projected (tests that run without a control plane).
        self._admission = admission
        self._name = name
        self._query = freshness.query_label(name)  # the metrics' label
        self._mongo = mongo
        self._changes = changes
        # Shared by the process's projection queries: its lock orders the health step per process, so a later
        # computation never holds older incident documents than one it overwrites; its index of URNs with incidents
        # spares a bulk batch of columns the incident reads.
        self._incidents = incidents
        self._only_tenant = only_tenant
        # EventProducer.publish waits with ``flush``, which is not safe from two threads on one client.
        self._publish_lock = publish_lock
        self._after_mongo = after_mongo
        self._pool = ThreadPoolExecutor(settings.spark.projection_workers, thread_name_prefix=f"{name}-tenant")

    def __call__(self, batch_df: DataFrame, batch_id: int) -> None:
        started = time.monotonic()
        timer = StepTimer(self._query)
        with tracer.start_as_current_span(
            "enrichment.projection_batch", attributes={"batch.id": batch_id, "query": self._name}
        ):
            with timer("collect"):
                raw = batch_df.select("key", "value", "headers", "topic", "partition", "offset", "timestamp").collect()
            by_tenant: dict[str, list[ParsedRow]] = {}
            for row in parse_rows(raw, self._only_tenant):
                if row.valid and row.tenant:
                    by_tenant.setdefault(row.tenant, []).append(row)
            if self._admission is not None and by_tenant:
                # A tenant being deleted (or deleted) gets no documents back: one control-plane read per batch.
                dropped = self._admission.refused(by_tenant)
                count_dropped({t: len(by_tenant.pop(t)) for t in sorted(dropped)}, self._name)
            with timer("mongo"):
                # MongoDB away (a restart, a failover): the batch waits for it instead of failing the query.
                wait_s = self._settings.mongo.outage_wait_s
                budget = SpanBudget()  # the batch's event spans, all tenants together
                written = while_unreachable(lambda: self._write_all(by_tenant, budget), wait_s, self._name)
            if self._after_mongo is not None:
                for tenant in sorted(written):
                    self._after_mongo(tenant, batch_id)
            self._announce(written, timer)
        elapsed = time.monotonic() - started
        BATCH_STEP.record(elapsed, {"query": self._query, "step": "batch"})
        log.info(
            "enrichment.projection_batch_done",
            extra={
                "query": self._name,
                "batch_id": batch_id,
                "records": len(raw),
                "tenants": len(by_tenant),
                "seconds": round(elapsed, 3),
                "steps": timer.steps,
            },
        )

    def close(self) -> None:
        self._pool.shutdown(wait=True)

    def _write_all(
        self, by_tenant: Mapping[str, list[ParsedRow]], budget: SpanBudget | None = None
    ) -> dict[str, _Written]:
        """Every tenant's MongoDB writes, several tenants at once; raises the first failure (the batch then fails
        and is replayed: the writes that did happen are no-ops the second time)."""

        def write(tenant: str) -> _Written:
            with bind_tenant(tenant), EventSpans(by_tenant[tenant], budget or SpanBudget()) as spans:
                return self._write(tenant, by_tenant[tenant], spans.traceparents)

        # A context copy per task: the batch span and log fields follow each tenant into its worker thread.
        futures = {t: self._pool.submit(contextvars.copy_context().run, write, t) for t in sorted(by_tenant)}
        return {tenant: future.result() for tenant, future in futures.items()}

    def _write(self, tenant: str, rows: list[ParsedRow], traces: Mapping[str, str]) -> _Written:
        now = datetime.now(UTC)
        names = names_for(tenant, self._settings.lake_root, dedicated=self._only_tenant is not None)
        database = self._mongo[names.mongo_database]
        states = [(spec, fold(spec, rows, now)) for spec in STATE_SPECS]
        applied = stale = 0
        for spec, folded in states:
            if folded:
                a, st = apply_upserts(database[spec.collection], map(spec_upsert(spec), folded))
                applied, stale = applied + a, stale + st
        by_table = {spec.table: folded for spec, folded in states}
        with self._incidents.lock:
            # After the assets' upserts: a new asset document exists by now and gets its health.
            health = self._health(tenant, database, by_table, now)
        # Each change continues its event's trace (processors/enrichment/tracing.py).
        changes = [e for spec, folded in states for e in change_events(tenant, spec, folded, traces)]
        changes += change_events(tenant, HEALTH, change_rows(health))
        # Kafka's timestamp (the producer's acknowledged append) to MongoDB holding the event: what users see.
        projected = (r.kafka_time for r in rows if r.event_type in freshness.PROJECTED_TYPES)
        freshness.record_times(projected, freshness.MONGODB, self._query)
        log.debug(
            "enrichment.tenant_projected", extra={"events": len(rows), "mongo_applied": applied, "mongo_stale": stale}
        )
        return _Written(changes, by_table[ASSETS.table], names.priority_topic)

    def _announce(self, written: Mapping[str, _Written], timer: StepTimer) -> None:
        """Publish what MongoDB now holds on ``metalake.changes`` and the automatic classifications of the batch's
        columns on each tenant's priority topic, in one call."""
        events = [e for tenant in sorted(written) for e in written[tenant].changes]
        topics: dict[str, str] = {}
        enrichment = self._settings.enrichment
        if enrichment.auto_classify:
            with timer("auto_classify"):
                for tenant in sorted(written):
                    tags = auto_classifications(
                        tenant, written[tenant].assets, DEFAULT_RULES, enrichment.pii_terms.get(tenant, ())
                    )
                    topics.update((e.id, written[tenant].priority_topic) for e in tags)
                    events += tags
                    if tags:
                        auto_tags.add(len(tags))
        with timer("changes"):
            self._publish(events, lambda e: topics.get(e.id, CHANGES_TOPIC))

    def _health(
        self,
        tenant: str,
        database: Any,  # noqa: ANN401
        by_table: Mapping[str, list[dict[str, Any]]],
        now: datetime,
    ) -> list[dict[str, Any]]:
        """The health of this batch's incidents' assets, and of this batch's assets that have incidents, from the
        incident documents MongoDB holds now (this batch's included); set on the asset documents, returned."""
        incidents = database[INCIDENTS.collection]
        if not self._incidents.loaded(tenant):
            self._incidents.load(tenant, (str(u) for u in incidents.distinct("urn")))
        urns = self._incidents.to_compute(
            tenant, (r["urn"] for r in by_table[INCIDENTS.table]), (r["urn"] for r in by_table[ASSETS.table])
        )
        if not urns:
            return []
        held = incidents.find({"urn": {"$in": urns}}, dict.fromkeys(INCIDENT_COLUMNS, 1))
        rows = asset_health(held, now)
        apply_updates(database[ASSETS.collection], map(mongo_health_update, rows))
        return rows

    def _publish(self, events: list[Any], topic: Callable[[Any], str]) -> None:
        if not events:
            return
        if self._publish_lock is None:
            self._changes.publish(events, topic)
            return
        with self._publish_lock:
            self._changes.publish(events, topic)


__all__ = ["AfterMongoHook", "ProjectionWriter"]
