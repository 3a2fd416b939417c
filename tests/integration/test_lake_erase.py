"""GDPR erase on the real stack: the URN (and its columns) leaves every Delta table, the disk and MongoDB; other
assets stay; the audit row names a hash, never the URN."""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from pathlib import Path
from typing import Any

import pytest
from itest import trino_rows, wait_for
from lakeit import event, lake_spark, publish, upsert
from pymongo import MongoClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from metalake.kafka import EventProducer
from metalake.settings import Settings
from metalake.urn import asset_urn
from processors.enrichment.tables import TABLES
from processors.lake.erase import erase
from processors.lake.scope import erase_target
from tenants.naming import TenantNames, names_for

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]

TABLE = asset_urn("postgres", "it", "shop", "public", "customers")
# Not a name the automatic classifier tags: its events would arrive after the erase and bring the URN back.
COLUMN = f"{TABLE}/notes"
LOOKALIKE = asset_urn("postgres", "it", "shop", "public", "customers_archive")  # shares the prefix, not a child
OTHER = asset_urn("postgres", "it", "shop", "public", "orders")
ERASED = (TABLE, COLUMN)
# The table's URN not followed by a character that would make it another name (the column's "/" does match).
ERASED_PATTERN = re.escape(TABLE) + r"(?![A-Za-z0-9_%.~-])"


def _seed(settings: Settings, tenant: str) -> None:
    incident = "com.montecarlodata.incident.opened.v1"
    publish(
        settings,
        [
            upsert(tenant, TABLE, kind="table", name="customers", description="who bought"),
            upsert(tenant, COLUMN, kind="column", name="notes", data_type="text"),
            upsert(tenant, LOOKALIKE, kind="table", name="customers_archive"),
            upsert(tenant, OTHER, kind="table", name="orders"),
            event(tenant, "io.metalake.classification.added.v1", urn=COLUMN, version=1, tag="PII", source="human"),
            event(tenant, "io.metalake.classification.added.v1", urn=OTHER, version=1, tag="GOLD", source="human"),
            event(tenant, "io.metalake.lineage.edge.added.v1", urn=OTHER, upstream=COLUMN, version=1),
            event(tenant, "io.metalake.lineage.edge.added.v1", urn=OTHER, upstream=LOOKALIKE, version=1),
            event(tenant, incident, urn=TABLE, version=1, incident_id="inc-1", status="opened"),
            event(tenant, incident, urn=OTHER, version=1, incident_id="inc-2", status="opened"),
        ],
    )
    # A poison record keyed by the URN: it lands in the tenant's _dlq with raw_key "<tenant>:<urn>".
    headers = [
        ("content-type", b"application/json"),
        ("ce_specversion", b"1.0"),
        ("ce_id", str(uuid.uuid4()).encode()),
        ("ce_source", b"/tests/lake"),
        ("ce_type", b"io.metalake.asset.upserted.v1"),
        ("ce_tenantid", tenant.encode()),
    ]
    value = json.dumps({"urn": TABLE, "kind": "table"}).encode()
    with EventProducer(settings) as producer:
        producer.publish_raw([("metalake.events.priority", "bad", f"{tenant}:{TABLE}".encode(), value, headers)])


def _files_with_rows(spark: SparkSession, names: TenantNames) -> set[Path]:
    """The data files that hold a row naming an erased URN, in any column (all cast to text)."""
    found: set[Path] = set()
    for spec in TABLES:
        frame = spark.read.format("delta").load(str(names.delta_path(spec.name)))
        text = F.concat_ws("\u0001", *(F.col(c).cast("string") for c in frame.columns))
        matching = frame.where(F.regexp_like(text, F.lit(ERASED_PATTERN)))
        hits = matching.select(F.input_file_name().alias("f")).distinct().collect()
        found |= {Path(r["f"].removeprefix("file:")) for r in hits}
    return found


def _grep(folder: Path, pattern: str) -> list[Path]:
    """Files whose raw bytes name an erased URN (the lookalike, which only shares a prefix, does not count)."""
    needle = re.compile(ERASED_PATTERN.encode())
    return [p for p in folder.rglob(pattern) if needle.search(p.read_bytes())]


def test_erase_removes_the_asset_and_its_columns_everywhere_and_audits_a_hash(
    settings: Settings,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    lake_spark: SparkSession,
) -> None:
    names = names_for(tenant, settings.lake_root)
    db = mongo[names.mongo_database]
    _seed(settings, tenant)
    wait_for("the assets in MongoDB", lambda: db["assets"].count_documents({}) == 4 or None)
    wait_for("the incidents in MongoDB", lambda: db["incidents"].count_documents({}) == 2 or None)
    wait_for("the edges in MongoDB", lambda: db["lineage"].count_documents({}) == 2 or None)
    wait_for("the tags in MongoDB", lambda: db["classifications"].count_documents({}) == 2 or None)
    schema = names.trino_schema
    wait_for("the dead letter in Trino", lambda: trino_rows(trino_cursor, f'SELECT reason FROM "{schema}"."_dlq"'))
    old_files = _files_with_rows(lake_spark, names)
    assert old_files, "the seeded rows are on disk before the erase"

    lines: list[str] = []
    target = erase_target(tenant, TABLE, include_children=True)
    # A short grace: only this test writes the tenant now (the production default spares files younger than 60 s).
    report = erase(lake_spark, mongo, settings, names, target, "dpo@it", lines.append, grace_s=5)

    # Delta: every table, including the events (subject, upstream in data) and the _dlq (raw key).
    assert report.delta_rows == {
        "events": 5,  # two upserts, the tag on the column, the edge from the column, the incident
        "assets": 2,
        "classifications": 1,
        "lineage_edges": 1,
        "incidents": 1,
        "_dlq": 1,
    }
    assert sorted(report.vacuumed) == sorted(report.delta_rows)
    assert report.mongo_documents == {"assets": 2, "classifications": 1, "lineage": 1, "incidents": 1}
    assert _files_with_rows(lake_spark, names) == set()
    # Physically gone: the files that held the rows are deleted, and no data file holds the URN's bytes.
    assert not any(f.exists() for f in old_files)
    assert _grep(names.lake_dir, "*.parquet") == []
    # The Delta log records the DELETE predicates as hashes: no commit file spells the URN.
    assert _grep(names.lake_dir, "*.json") == []

    # Other assets stay, in Delta (read through Trino) and in MongoDB.
    assets = trino_rows(trino_cursor, f'SELECT urn FROM "{schema}".assets ORDER BY urn')
    assert assets == [(LOOKALIKE,), (OTHER,)]
    edges = trino_rows(trino_cursor, f'SELECT upstream, urn FROM "{schema}".lineage_edges')
    assert edges == [(LOOKALIKE, OTHER)]
    assert sorted(d["_id"] for d in db["assets"].find()) == [LOOKALIKE, OTHER]
    assert [d["_id"] for d in db["classifications"].find()] == [f"{OTHER}|GOLD"]
    assert [d["_id"] for d in db["lineage"].find()] == [f"{LOOKALIKE}|{OTHER}"]
    assert [d["incident_id"] for d in db["incidents"].find()] == ["inc-2"]

    # The audit row: who, what, a hash of the target and counts; no erased value anywhere in the table's files.
    rows = lake_spark.read.format("delta").load(str(names.delta_path("audit"))).collect()
    assert len(rows) == 1
    row = rows[0].asDict()
    assert (row["actor"], row["action"], row["result"]) == ("dpo@it", "erase.asset_and_children", "done")
    assert row["target_hash"] == hashlib.sha256(TABLE.encode()).hexdigest()
    assert json.loads(row["counts"])["delta.events"] == 5
    assert not any(urn in str(v) for v in row.values() for urn in ERASED)
    assert not any(b"customers" in p.read_bytes() for p in names.delta_path("audit").rglob("*") if p.is_file())

    # Erasing again finds nothing and says so.
    again = erase(lake_spark, mongo, settings, names, target, "dpo@it", grace_s=5)
    assert set(again.delta_rows.values()) == {0} and again.vacuumed == []
