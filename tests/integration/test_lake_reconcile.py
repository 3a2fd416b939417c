"""``reconcile`` finds nothing on a healthy tenant, and finds and repairs exactly what was broken by hand: documents
and the assets' health columns (a separate step of the job writes them)."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import SparkSession

from metalake.urn import asset_urn
from ops.settings import Settings
from processors.lake.reconcile import HEALTH_HELD, SpecResult, reconcile
from tenants.naming import names_for
from tests._support.itest import wait_for
from tests._support.lakeit import event, lake_spark, publish, upsert

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]

A, B, C = (asset_urn("postgres", "it", "rec", "public", t) for t in ("a", "b", "c"))


def test_reconcile_reports_zero_then_exactly_the_broken_documents_and_repairs_them(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], lake_spark: SparkSession
) -> None:
    names = names_for(tenant, settings.lake_root)
    db = mongo[names.mongo_database]
    publish(
        settings,
        [
            *(upsert(tenant, urn, 3, kind="table", name=urn[-1]) for urn in (A, B, C)),
            event(tenant, "io.metalake.classification.added.v1", urn=A, version=1, tag="PII", source="human"),
            event(tenant, "io.metalake.lineage.edge.added.v1", urn=B, upstream=A, version=1),
            event(tenant, "com.montecarlodata.incident.opened.v1", urn=C, version=1, incident_id="i1", status="opened"),
        ],
    )
    wait_for("the assets", lambda: db["assets"].count_documents({}) == 3 or None)
    wait_for("the incident", lambda: db["incidents"].count_documents({}) == 1 or None)
    wait_for(
        "the tag and the edge",
        lambda: db["classifications"].count_documents({}) + db["lineage"].count_documents({}) == 2 or None,
    )
    wait_for("C's health", lambda: db["assets"].find_one({"_id": C, "health": "degraded"}))

    # MongoDB is written by the job's projection queries, apart from the lake query's Delta commits: it may lead Delta
    # by a batch or so. A healthy tenant converges to no difference.
    def clean() -> list[SpecResult] | None:
        results = reconcile(lake_spark, mongo, names, dry_run=True, echo=lambda _: None)
        return results if all(r.difference.total == 0 for r in results) else None

    healthy = wait_for("a dry run without differences", clean, timeout_s=180, interval_s=5)
    # assets, classifications, lineage, incidents; propagated tags depend on whether a propagation processor runs.
    assert [r.delta_rows for r in healthy][:4] == [3, 1, 1, 1]
    assert healthy[-1].table == "asset_health" and healthy[-1].delta_rows == 3

    before = db["assets"].find_one({"_id": C})
    healthy_a = db["assets"].find_one({"_id": A})
    assert before is not None and healthy_a is not None
    assert (before["health"], before["open_incidents"], before["open_incident_ids"]) == ("degraded", 1, ["i1"])
    db["assets"].delete_one({"_id": B})
    db["assets"].update_one({"_id": C}, {"$set": {"version": 999, "name": "corrupted"}})
    db["assets"].insert_one({"_id": "urn:metalake:postgres:it/ghost", "version": 1, "event_id": "x"})
    # Health damaged by hand: A's lost (no field left), C's stale (an older computation: healthy, nothing open).
    db["assets"].update_one({"_id": A}, {"$unset": dict.fromkeys(HEALTH_HELD, "")})
    stale = {"health": "healthy", "health_severity": None, "open_incidents": 0, "open_incident_ids": []}
    db["assets"].update_one({"_id": C}, {"$set": {**stale, "health_version": 0, "health_event_id": ""}})

    found = {r.table: r for r in reconcile(lake_spark, mongo, names, dry_run=True, echo=lambda _: None)}
    assets = found["assets"].difference
    assert (assets.missing, assets.ahead, assets.extra, assets.behind) == (
        [B],
        [C],
        ["urn:metalake:postgres:it/ghost"],
        [],
    )
    health = found["asset_health"].difference
    assert (health.missing, health.behind, health.ahead, health.extra) == ([A], [C], [], [])
    assert sum(r.difference.total for r in found.values()) == 5
    assert db["assets"].count_documents({}) == 3  # the dry run changed nothing
    assert db["assets"].find_one({"_id": C}, {"_id": 0, **dict.fromkeys(stale, 1)}) == stale
    assert "health" not in (db["assets"].find_one({"_id": A}) or {})

    fixed = {r.table: r for r in reconcile(lake_spark, mongo, names, echo=lambda _: None)}
    assert (fixed["assets"].upserted, fixed["assets"].replaced, fixed["assets"].deleted) == (1, 1, 1)
    # C through the job's own guarded health update, A (Delta holds no health pair for it) guarded by what was read.
    assert (fixed["asset_health"].upserted, fixed["asset_health"].replaced) == (1, 1)
    assert sorted(d["_id"] for d in db["assets"].find()) == [A, B, C]
    after = db["assets"].find_one({"_id": C})
    after_a = db["assets"].find_one({"_id": A})
    assert after is not None and after_a is not None
    assert {k: after[k] for k in ("version", "event_id", "name")} == {
        k: before[k] for k in ("version", "event_id", "name")
    }
    assert {k: after.get(k) for k in HEALTH_HELD} == {k: before.get(k) for k in HEALTH_HELD}
    assert {k: after_a.get(k) for k in HEALTH_HELD} == {k: healthy_a.get(k) for k in HEALTH_HELD}
    assert after_a["health"] == "healthy"

    # The CLI path (a subprocess with its own Spark) agrees: nothing left to repair.
    done = subprocess.run(
        [sys.executable, "-m", "ops", "lake", "reconcile", "--tenant", tenant, "--dry-run"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout)
    assert (report["tenant"], report["dry_run"], report["differences"]) == (tenant, True, 0)
