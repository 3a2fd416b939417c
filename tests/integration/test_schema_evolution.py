"""Schema evolution: tables made by an older spec get the new columns without DDL by hand, and Trino reads them.

The tenant's ``assets``, ``classifications`` and ``lineage_edges`` are created here as an older job made them (no
health columns, no propagation attributes), with a row each, and registered in Trino. Then the tenant's own streaming
job (dedicated: its own topics and checkpoint) gets events that carry the new fields, is stopped, and restarted on
its checkpoint for more events.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import SparkSession

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.tables import typed
from tenants.lake_catalog import register_tables
from tenants.naming import TenantNames, names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.lakeit import lake_spark
from tests._support.streamjob import Job, publish_confirmed
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]

META = ("deleted", "version", "event_id", "event_time", "updated_at")
# The tables as the job created them before health and propagation attributes existed.
OLD_COLUMNS = {
    "assets": (
        "urn",
        "kind",
        "name",
        "platform",
        "qualified_name",
        "description",
        "data_type",
        "owners",
        "properties",
        *META,
    ),
    "classifications": ("urn", "tag", "source", "propagate", "confidence", "rule", "actor", *META),
    "lineage_edges": ("upstream", "urn", "blocked_tags", "transformation", *META),
}
OLD_TABLE = asset_urn("postgres", "evo", "shop", "public", "old_orders")
NEW_TABLE = asset_urn("postgres", "evo", "shop", "public", "new_orders")
T0 = datetime(2026, 1, 1, tzinfo=UTC)


@pytest.fixture
def dedicated(settings: Settings, stack: StackManager, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    yield names


def _old_tables(spark: SparkSession, settings: Settings, names: TenantNames) -> None:
    old_row: dict[str, dict[str, Any]] = {
        "assets": {"urn": OLD_TABLE, "kind": "table", "name": "old_orders", "description": "from the old job"},
        "classifications": {"urn": OLD_TABLE, "tag": "PII", "source": "human"},
        "lineage_edges": {"upstream": OLD_TABLE, "urn": NEW_TABLE, "transformation": "copy"},
    }
    for table, columns in OLD_COLUMNS.items():
        values = {**old_row[table], "deleted": False, "version": 1, "event_id": "old", "event_time": T0}
        frame = spark.createDataFrame([tuple(values.get(c) for c in columns)], typed(columns))
        frame.write.format("delta").mode("errorifexists").save(str(names.delta_path(table)))
    register_tables(settings, names, tuple(OLD_COLUMNS))


def _event(tenant: str, event_type: str, data: dict[str, Any]) -> CloudEvent:
    return new_event(event_type, tenant, data, source="/tests/evolution")


def _alive(job: Job) -> bool:
    if not job.alive:
        raise AssertionError(f"the streaming job died:\n{job.tail()}")
    return True


def _delta_log_actions(path: Path, kind: str) -> list[dict[str, Any]]:
    out = []
    for commit in sorted((path / "_delta_log").glob("*.json")):
        out += [a[kind] for a in map(json.loads, commit.read_text().splitlines()) if kind in a]
    return out


def test_new_fields_land_on_tables_made_by_an_older_spec_and_trino_reads_old_and_new_rows(
    settings: Settings,
    dedicated: TenantNames,
    lake_spark: SparkSession,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    tenant, schema = dedicated.tenant_id, schema_of(dedicated)
    _old_tables(lake_spark, settings, dedicated)
    assert trino_rows(trino_cursor, f'SELECT urn, description FROM "{schema}".assets') == [
        (OLD_TABLE, "from the old job")
    ]

    job = Job(tenant, tmp_path / "job-1.log")
    try:
        job.wait_ready()
        with EventProducer(settings) as producer:
            publish_confirmed(
                producer,
                [
                    _event(
                        tenant,
                        "io.metalake.asset.upserted.v1",
                        {"urn": NEW_TABLE, "version": 1, "kind": "table", "name": "new_orders"},
                    ),
                    _event(
                        tenant,
                        "io.metalake.classification.added.v1",
                        {
                            "urn": NEW_TABLE,
                            "version": 1,
                            "tag": "PII",
                            "source": "human",
                            "restrict_propagation_through_lineage": True,
                            "remove_propagations_on_entity_delete": False,
                        },
                    ),
                    _event(
                        tenant,
                        "io.metalake.lineage.edge.added.v1",
                        {"upstream": NEW_TABLE, "urn": OLD_TABLE, "version": 1, "propagation": "both"},
                    ),
                ],
                dedicated,
            )
        db = mongo[dedicated.mongo_database]
        wait_for(
            "the new edge in MongoDB",
            lambda: _alive(job) and db["lineage"].find_one({"_id": f"{NEW_TABLE}|{OLD_TABLE}"}),
            timeout_s=300,
        )
        # MongoDB leads Delta (the projection queries do not wait for the lake query): the edge in Delta too.
        sql = f'SELECT count(*) FROM "{schema}".lineage_edges WHERE upstream = ?'
        wait_for(
            "the new edge in Delta",
            lambda: (_alive(job) and trino_rows(trino_cursor, sql, [NEW_TABLE]) == [(1,)]) or None,
            timeout_s=300,
        )
    finally:
        job.stop()
    assert job.proc.returncode == 0, job.tail()

    # Old rows read null in the new columns; new rows carry the new fields; both in one SELECT.
    tags = trino_rows(
        trino_cursor,
        f"SELECT urn, tag, source, restrict_propagation_through_lineage, remove_propagations_on_entity_delete "
        f'FROM "{schema}".classifications ORDER BY urn',
    )
    assert tags == [(NEW_TABLE, "PII", "human", True, False), (OLD_TABLE, "PII", "human", None, None)]
    edges = trino_rows(
        trino_cursor, f'SELECT upstream, urn, transformation, propagation FROM "{schema}".lineage_edges ORDER BY 1'
    )
    assert edges == [(NEW_TABLE, OLD_TABLE, None, "both"), (OLD_TABLE, NEW_TABLE, "copy", None)]
    assets = trino_rows(
        trino_cursor, f'SELECT urn, description, health, open_incidents FROM "{schema}".assets ORDER BY urn'
    )
    assert assets == [(NEW_TABLE, None, "healthy", 0), (OLD_TABLE, "from the old job", None, None)]
    doc = mongo[dedicated.mongo_database]["assets"].find_one({"_id": NEW_TABLE})
    assert doc is not None and (doc["health"], doc["open_incidents"], doc.get("open_incident_ids")) == (
        "healthy",
        0,
        None,
    )
    # A table the old job never had (a spec added since) was created and registered.
    assert trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema}".propagated_tags') == [(0,)]

    # Only additive metadata changes: no column mapping, no new reader or writer feature that Trino 476 lacks.
    for table in OLD_COLUMNS:
        path = dedicated.delta_path(table)
        assert _delta_log_actions(path, "protocol") == [{"minReaderVersion": 1, "minWriterVersion": 2}]
        for metadata in _delta_log_actions(path, "metaData"):
            assert not any(k.startswith("delta.columnMapping") for k in metadata.get("configuration", {}))

    # The job restarted on the checkpoint it left: the schema is already current; new events flow as before.
    job = Job(tenant, tmp_path / "job-2.log")
    try:
        job.wait_ready()
        with EventProducer(settings) as producer:
            publish_confirmed(
                producer,
                [
                    _event(
                        tenant,
                        "io.metalake.classification.added.v1",
                        {"urn": OLD_TABLE, "version": 2, "tag": "PII", "source": "human", "rule": "restart"},
                    )
                ],
                dedicated,
            )
        wait_for(
            "the restarted job's write in Trino",
            lambda: (
                _alive(job)
                and trino_rows(
                    trino_cursor,
                    f'SELECT rule FROM "{schema}".classifications WHERE urn = ? AND version = 2',
                    [OLD_TABLE],
                )
            ),
            timeout_s=300,
        )
    finally:
        job.stop()
    assert job.proc.returncode == 0, job.tail()
    assert "enrichment.schema_evolved" in (tmp_path / "job-1.log").read_text()
    assert "enrichment.schema_evolved" not in (tmp_path / "job-2.log").read_text()
