"""``maintain`` compacts a table written by several small commits, and the table reads the same rows afterwards."""

from __future__ import annotations

from typing import Any

import pytest
from itest import trino_rows, wait_for
from lakeit import lake_spark, publish, upsert
from pymongo import MongoClient
from pyspark.sql import SparkSession

from metalake.settings import Settings
from metalake.urn import asset_urn
from processors.lake.maintain import maintain
from tenants.naming import names_for

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
    # One event per batch: wait for each before the next, so every one is its own small commit.
    for i in range(3):
        publish(
            settings, [upsert(tenant, asset_urn("postgres", "it", "db", "public", f"t{i}"), kind="table", name=f"t{i}")]
        )
        wait_for(f"asset {i} in MongoDB", lambda n=i + 1: assets.count_documents({}) == n or None)
    schema = names.trino_schema
    query = f'SELECT event_id, subject, version FROM "{schema}".events ORDER BY event_id'
    before = wait_for("the events in Trino", lambda: (r := trino_rows(trino_cursor, query)) and len(r) == 3 and r)
    assets_query = f'SELECT urn, version, event_id FROM "{schema}".assets ORDER BY urn'
    assets_before = trino_rows(trino_cursor, assets_query)

    lines: list[str] = []
    reports = {r.table: r for r in maintain(lake_spark, [names], echo=lines.append)}

    assert reports["events"].files_before >= 3
    assert reports["events"].files_after < reports["events"].files_before
    assert reports["assets"].files_after < reports["assets"].files_before
    assert all(r.tenant == tenant and r.seconds > 0 for r in reports.values())
    assert f"maintain {tenant}/events ..." in lines
    # A checkpoint was written, and nothing else changed for readers.
    assert (names.delta_path("events") / "_delta_log" / "_last_checkpoint").exists()
    assert trino_rows(trino_cursor, query) == before
    assert trino_rows(trino_cursor, assets_query) == assets_before
