"""Two pooled tenants in the same bucket of the shared tables, with the same URNs: erasing an asset of one, then
dropping that tenant (``python -m processors.lake.drop``, the interface deprovisioning calls), leaves every row of the
other as it was."""

from __future__ import annotations

import secrets
from typing import Any

import pytest
from pymongo import MongoClient
from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from metalake.urn import asset_urn
from ops.settings import Settings
from processors.lake.erase import erase
from processors.lake.scope import erase_target
from tenants.naming import POOLED_TABLES, TenantNames, names_for, tenant_bucket
from tests._support.itest import wait_for
from tests._support.lakeit import drop_tenant, event, lake_spark, publish, upsert

pytestmark = pytest.mark.integration
__all__ = ["lake_spark"]

# The same URNs in both tenants: only the tenant predicate tells their rows apart.
GONE = asset_urn("postgres", "it", "drop", "public", "customers")
KEPT = asset_urn("postgres", "it", "drop", "public", "orders")


def _neighbour(tenant: str) -> str:
    """A fresh tenant id in the same bucket as ``tenant`` (1 in 16 random ids is)."""
    while True:
        other = f"it-{secrets.token_hex(4)}"
        if other != tenant and tenant_bucket(other) == tenant_bucket(tenant):
            return other


def _seed(settings: Settings, tenant: str) -> None:
    publish(
        settings,
        [
            upsert(tenant, GONE, kind="table", name="customers"),
            upsert(tenant, KEPT, kind="table", name="orders"),
            event(tenant, "io.metalake.classification.added.v1", urn=GONE, version=1, tag="PII", source="human"),
            event(tenant, "io.metalake.lineage.edge.added.v1", urn=KEPT, upstream=GONE, version=1),
        ],
    )


def _rows(spark: SparkSession, names: TenantNames) -> dict[str, list[str]]:
    """Every row of the tenant in every shared table, as sorted JSON: any change to them shows."""
    out = {}
    for table in POOLED_TABLES:
        place = names.table(table)
        frame = spark.read.format("delta").load(str(place.path)).where(place.predicate or "true")
        out[table] = sorted(r[0] for r in frame.select(F.to_json(F.struct("*"))).collect())
    return out


def test_erasing_and_dropping_a_pooled_tenant_leaves_its_bucket_neighbour_intact(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], lake_spark: SparkSession
) -> None:
    doomed, neighbour = names_for(tenant, settings.lake_root), names_for(_neighbour(tenant), settings.lake_root)
    for names in (doomed, neighbour):
        _seed(settings, names.tenant_id)
    for names in (doomed, neighbour):
        db = mongo[names.mongo_database]
        wait_for(f"{names.tenant_id}'s assets", lambda db=db: db["assets"].count_documents({}) == 2 or None)
        wait_for(f"{names.tenant_id}'s edge", lambda db=db: db["lineage"].count_documents({}) == 1 or None)
        wait_for(f"{names.tenant_id}'s tag", lambda db=db: db["classifications"].count_documents({}) == 1 or None)
    # MongoDB leads Delta (the job's projection queries write it apart from the lake query): wait for Delta too.
    held = {"events": 4, "assets": 2, "classifications": 1, "lineage_edges": 1}
    for names in (doomed, neighbour):
        wait_for(
            f"{names.tenant_id}'s rows in Delta",
            lambda names=names: {t: len(_rows(lake_spark, names)[t]) for t in held} == held or None,
            timeout_s=180,
        )
    before = _rows(lake_spark, neighbour)
    assert len(before["assets"]) == 2 and len(before["events"]) == 4

    report = erase(lake_spark, mongo, settings, doomed, erase_target(tenant, GONE), "dpo@it", grace_s=5)
    assert (report.delta_rows["assets"], report.delta_rows["lineage_edges"], report.delta_rows["events"]) == (1, 1, 3)
    assert "_pooled/assets" in report.vacuumed
    assert [r for r in _rows(lake_spark, doomed)["assets"] if GONE in r] == []
    assert _rows(lake_spark, neighbour) == before
    assert mongo[neighbour.mongo_database]["assets"].count_documents({}) == 2
    assert doomed.delta_path("audit").is_dir()  # the erase's audit row

    dropped = drop_tenant(tenant)
    assert (dropped["tenant"], dropped["tier"], dropped["removed"]) == (tenant, "pooled", [tenant])
    assert dropped["shared_rows"]["assets"] == 1 and dropped["shared_rows"]["events"] >= 1
    assert {t: len(r) for t, r in _rows(lake_spark, doomed).items()} == dict.fromkeys(POOLED_TABLES, 0)
    assert not doomed.lake_dir.exists()
    assert _rows(lake_spark, neighbour) == before

    # Again: nothing left, nothing touched, still a success (a deprovisioning may retry).
    again = drop_tenant(tenant)
    assert set(again["shared_rows"].values()) == {0} and again["vacuumed"] == [] and again["removed"] == []
