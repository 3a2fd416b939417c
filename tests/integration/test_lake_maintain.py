"""``maintain`` of a named pooled tenant compacts its bucket of the shared tables (written by several small commits)
and its audit table, nothing else, and the tables read the same rows afterwards. The dedicated tier's case is in
test_lake_dedicated."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import SparkSession

from metalake.urn import asset_urn
from ops.settings import Settings
from processors.lake.maintain import maintain
from tenants.naming import POOLED_TABLES, names_for, tenant_bucket
from tests._support.itest import trino_rows, wait_for
from tests._support.lakeit import lake_spark, publish, upsert
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]


def test_maintain_compacts_small_files_and_keeps_every_row(
    settings: Settings,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    lake_spark: SparkSession,
) -> None:
    names = names_for(tenant, settings.lake_root)
    assets = mongo[names.mongo_database]["assets"]
    schema = schema_of(names)
    query = f'SELECT event_id, subject, version FROM "{schema}".events ORDER BY event_id'
    # One event per lake batch: wait for each in Delta (through Trino) before the next, so every one is its own small
    # commit. MongoDB is not proof: the projection queries run on a 100 ms trigger, the lake query on 1 s, so two
    # events seen one by one in MongoDB can still share a lake batch (and a file).
    for i in range(3):
        publish(
            settings, [upsert(tenant, asset_urn("postgres", "it", "db", "public", f"t{i}"), kind="table", name=f"t{i}")]
        )
        wait_for(f"asset {i} in MongoDB", lambda n=i + 1: assets.count_documents({}) == n or None)
        before = wait_for(
            f"event {i} in Delta", lambda n=i + 1: (r := trino_rows(trino_cursor, query)) and len(r) == n and r
        )
    assets_query = f'SELECT urn, version, event_id FROM "{schema}".assets ORDER BY urn'
    # MongoDB may lead Delta, and a batch commits events before assets: wait for the assets in Delta too.
    assets_before = wait_for(
        "the assets in Trino", lambda: (r := trino_rows(trino_cursor, assets_query)) and len(r) == 3 and r
    )

    lines: list[str] = []
    reports = {r.table: r for r in maintain(lake_spark, [names], echo=lines.append) if r.tenant == "_pooled"}

    # The shared tables, each once, OPTIMIZE limited to the tenant's bucket (other tests write other files there).
    bucket = f"tenant_bucket = {tenant_bucket(tenant)}"
    assert set(reports) == set(POOLED_TABLES)
    assert {r.where for r in reports.values()} == {bucket}
    assert reports["events"].files_before >= 3
    # The job keeps appending to the shared tables (other tests' tenants share the bucket): the count after may have
    # grown again; what OPTIMIZE itself removed shows the compaction.
    assert reports["events"].compacted >= 3
    assert reports["assets"].compacted >= 2
    assert all(r.seconds > 0 for r in reports.values())
    assert f"maintain _pooled/events WHERE {bucket} ..." in lines
    assert f"maintain {tenant}/audit ..." in lines  # its own table: skipped if it has none yet, but looked at
    assert not any(line.startswith("maintain ") and "_pooled" not in line and tenant not in line for line in lines)
    # A checkpoint was written, and nothing else changed for readers.
    assert (names.table("events").path / "_delta_log" / "_last_checkpoint").exists()
    assert trino_rows(trino_cursor, query) == before
    assert trino_rows(trino_cursor, assets_query) == assets_before
