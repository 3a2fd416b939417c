"""A multi-tenant micro-batch written with ``enrichment.tenant_parallelism`` > 1: every tenant's rows land exactly
once, and the same batch id written again (a replay after a crash, by a new process) commits nothing."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)
from streamjob import txn_versions

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from metalake.settings import Settings
from metalake.urn import asset_urn
from processors.enrichment.session import build_spark
from processors.enrichment.writer import BatchWriter
from tenants.naming import names_for

pytestmark = pytest.mark.integration

TENANTS = 4
ASSETS_PER_TENANT = 3
PARALLELISM = 3
TABLES = ("events", "assets", "classifications")
SOURCE = "/tests/tenant-parallelism"

KAFKA_ROWS = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
        ),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)


@pytest.fixture(scope="module")
def spark(settings: Settings) -> Iterator[SparkSession]:
    session = build_spark(settings, "metalake-it-tenant-parallelism")
    yield session
    session.stop()


def _events(tenant: str) -> list[CloudEvent]:
    out = []
    for i in range(ASSETS_PER_TENANT):
        urn = asset_urn("postgres", "it", "shop", "public", f"orders{i}")
        out.append(
            new_event(
                "io.metalake.asset.upserted.v1",
                tenant,
                {"urn": urn, "version": 1, "kind": "table", "name": f"orders{i}"},
                source=SOURCE,
            )
        )
        out.append(
            new_event(
                "io.metalake.classification.added.v1",
                tenant,
                {"urn": urn, "version": 1, "tag": "Finance", "source": "human", "actor": "it@acme.example"},
                source=SOURCE,
            )
        )
    return out


def _batch(spark: SparkSession, events: list[CloudEvent]) -> DataFrame:
    """The rows the Kafka source would hand ``foreachBatch`` for these events, interleaved across tenants."""
    now = datetime.now(UTC)
    rows = [
        (e.key, e.value(), [(k, v) for k, v in e.headers()], "metalake.events.priority", 0, offset, now)
        for offset, e in enumerate(events)
    ]
    return spark.createDataFrame(rows, KAFKA_ROWS)


def _commits(table_dir: Path) -> list[str]:
    return sorted(p.name for p in (table_dir / "_delta_log").glob("*.json"))


def test_parallel_tenants_write_exactly_once_and_a_replay_commits_nothing(
    settings: Settings, spark: SparkSession, mongo: MongoClient[dict[str, Any]], caplog: pytest.LogCaptureFixture
) -> None:
    # No auto-classification: its events would go to the pooled job through Kafka and write these tables too.
    enrichment = settings.enrichment.model_copy(update={"tenant_parallelism": PARALLELISM, "auto_classify": False})
    job_settings = settings.model_copy(update={"enrichment": enrichment})
    run = secrets.token_hex(4)
    tenants = [f"it-{run}-{i}" for i in range(TENANTS)]
    per_tenant = [_events(t) for t in tenants]
    interleaved = [e for group in zip(*per_tenant, strict=True) for e in group]
    batch = _batch(spark, interleaved)
    app_id = f"it-parallel-{run}"
    names = [names_for(t, settings.lake_root) for t in tenants]

    with EventProducer(settings) as changes, caplog.at_level(logging.INFO, logger="processors.enrichment.writer"):
        writer = BatchWriter(job_settings, app_id, mongo, changes=changes)
        try:
            writer(batch, 0)
        finally:
            writer.close()
        done = [r for r in caplog.records if r.getMessage() == "enrichment.batch_done"]
        assert [(getattr(r, "tenants", None), getattr(r, "tenant_parallelism", None)) for r in done] == [
            (TENANTS, PARALLELISM)
        ]

        for n, events in zip(names, per_tenant, strict=True):
            stored = spark.read.format("delta").load(str(n.delta_path("events"))).select("event_id").collect()
            assert sorted(r["event_id"] for r in stored) == sorted(e.id for e in events)
            assets = spark.read.format("delta").load(str(n.delta_path("assets"))).select("urn").collect()
            assert len(assets) == ASSETS_PER_TENANT
            tags = spark.read.format("delta").load(str(n.delta_path("classifications"))).collect()
            assert len(tags) == ASSETS_PER_TENANT
            for table in TABLES:
                # Each table of each tenant got this batch's write once, under this job's appId.
                assert txn_versions(n.delta_path(table)).count((app_id, 0)) == 1, (n.tenant_id, table)
            assert mongo[n.mongo_database]["assets"].count_documents({}) == ASSETS_PER_TENANT
            assert mongo[n.mongo_database]["classifications"].count_documents({}) == ASSETS_PER_TENANT
        before = {(n.tenant_id, t): _commits(n.delta_path(t)) for n in names for t in TABLES}
        mongo_before = {n.tenant_id: list(mongo[n.mongo_database]["assets"].find({}, sort=[("_id", 1)])) for n in names}

        # The same batch id again, by a new writer (as a restarted process replays it): Delta skips every write.
        replay = BatchWriter(job_settings, app_id, mongo, changes=changes)
        try:
            replay(batch, 0)
        finally:
            replay.close()

    assert {(n.tenant_id, t): _commits(n.delta_path(t)) for n in names for t in TABLES} == before
    for n in names:
        assert spark.read.format("delta").load(str(n.delta_path("events"))).count() == 2 * ASSETS_PER_TENANT
        assert list(mongo[n.mongo_database]["assets"].find({}, sort=[("_id", 1)])) == mongo_before[n.tenant_id]
