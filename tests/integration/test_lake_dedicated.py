"""The lake commands on a dedicated tenant (its own streaming job, topics and tables): its tier is found from its own
table folders (it is not registered), reconcile reads its own tables, maintain and erase touch its tables only (never
the shared ones), and drop removes its whole lake folder. Its job serves its metrics on ``--health-port``: each event's
freshness per store, exactly once."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import SparkSession

from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.lake.discover import connect
from processors.lake.erase import erase
from processors.lake.maintain import maintain
from processors.lake.reconcile import reconcile
from processors.lake.scope import erase_target
from tenants.naming import TenantNames, names_for
from tests._support.itest import wait_for
from tests._support.lakeit import drop_tenant, event, lake_spark, upsert
from tests._support.scrape import sample, scrape, series
from tests._support.streamjob import Job, publish_confirmed

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]


JOB_HEALTH_PORT = 28140  # of the metrics suite's port block (28100-28199)


def _assert_job_metrics(text: str, names: TenantNames, events: int) -> None:
    """Each event's freshness once in Delta (its state table's MERGE) and once in MongoDB; the batches' steps; the
    queries' lag per partition; labels by query role, never the tenant the queries are named after."""
    for store, query in (("delta", "lake"), ("mongodb", "mongo-priority")):
        labels = {"store": store, "query": query}
        assert sample(text, "metalake_freshness_seconds_count", labels) == events, (store, text)
        assert sample(text, "metalake_freshness_seconds_bucket", {**labels, "le": "+Inf"}) == events
        assert sample(text, "metalake_freshness_seconds_sum", labels) > 0
    assert sample(text, "metalake_batch_step_seconds_count", {"query": "lake", "step": "merge_assets"}) >= 1
    assert sample(text, "metalake_batch_step_seconds_count", {"query": "mongo-priority", "step": "mongo"}) >= 1
    lags = series(text, "metalake_consumer_lag_records", {"group": "lake", "topic": names.priority_topic})
    assert lags and all(lag >= 0 for lag in lags)
    assert sample(text, "metalake_ready", {}) == 1
    assert names.tenant_id not in text.replace(names.priority_topic, "").replace(names.bulk_topic, "")


@pytest.fixture
def dedicated(settings: Settings, stack: StackManager, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    yield names


def test_lake_commands_on_a_dedicated_tenant_touch_its_own_tables_only(
    settings: Settings,
    dedicated: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    lake_spark: SparkSession,
    tmp_path: Path,
) -> None:
    tenant = dedicated.tenant_id
    urns = [asset_urn("postgres", "it", "ded", "public", f"t{i}") for i in range(3)]
    assets = mongo[dedicated.mongo_database]["assets"]
    # Its health port serves its metrics too: the freshness of these events, per store (issue 23).
    token = secrets.token_urlsafe(24)
    job = Job(
        tenant,
        tmp_path / "job.log",
        env={"METALAKE_TELEMETRY__METRICS_TOKEN": token},
        extra_args=["--health-port", str(JOB_HEALTH_PORT)],
    )
    try:
        job.wait_ready()
        with EventProducer(settings) as producer:
            # One event per batch: each its own small commit, for maintain to compact.
            for i, urn in enumerate(urns):
                publish_confirmed(producer, [upsert(tenant, urn, kind="table", name=f"t{i}")], dedicated)
                wait_for(f"asset {i}", lambda n=i + 1: assets.count_documents({}) == n or None, timeout_s=180)
            added = "io.metalake.classification.added.v1"
            tag = event(tenant, added, urn=urns[0], version=1, tag="PII", source="human")
            publish_confirmed(producer, [tag], dedicated)
        classifications = mongo[dedicated.mongo_database]["classifications"]
        wait_for("the tag", lambda: classifications.count_documents({}) == 1 or None, timeout_s=180)
        # MongoDB leads Delta (the projection queries write it apart from the lake query): wait for Delta too.
        own = {t: dedicated.table(t).path for t in ("assets", "classifications")}

        def in_delta() -> bool | None:
            assert job.alive, job.tail()
            counts = {
                t: lake_spark.read.format("delta").load(str(p)).count() if p.is_dir() else 0 for t, p in own.items()
            }
            return counts == {"assets": 3, "classifications": 1} or None

        wait_for("the rows in the tenant's own tables", in_delta, timeout_s=180, interval_s=2)
        _assert_job_metrics(scrape(f"http://127.0.0.1:{JOB_HEALTH_PORT}/metrics", token), dedicated, events=4)
    finally:
        job.stop()

    with connect(settings) as directory:
        names = directory.named(tenant)
    assert names.dedicated and not names.table("assets").shared

    results = reconcile(lake_spark, mongo, names, dry_run=True, echo=lambda _: None)
    assert [r.difference.total for r in results] == [0] * len(results)
    assert [r.delta_rows for r in results][:2] == [3, 1]

    reports = maintain(lake_spark, [names], echo=lambda _: None)
    assert {r.tenant for r in reports} == {tenant}  # no shared table
    events = next(r for r in reports if r.table == "events")
    assert events.where is None and events.files_after < events.files_before

    report = erase(lake_spark, mongo, settings, names, erase_target(tenant, urns[0]), "dpo@it", grace_s=5)
    assert (report.delta_rows["assets"], report.delta_rows["classifications"]) == (1, 1)
    assert sorted(report.vacuumed) == sorted(f"{tenant}/{t}" for t in ("events", "assets", "classifications"))
    assert sorted(d["_id"] for d in assets.find()) == urns[1:]

    dropped = drop_tenant(tenant)
    assert (dropped["tier"], dropped["removed"], dropped["vacuumed"]) == ("dedicated", [tenant], [])
    assert not names.lake_dir.exists()
