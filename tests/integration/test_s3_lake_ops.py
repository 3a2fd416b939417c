"""The lake commands that act on tenants, on a lake on S3 (the local stack's SeaweedFS, FerretDB; started here if the
session has no SeaweedFS, as test_s3_lake.py does):

- ``drop`` of a pooled tenant (the CLI deprovisioning runs): its rows leave the shared tables under the writer leases
  and its folder's objects go, its bucket neighbour's rows stay; a rerun is a quiet no-op;
- ``reconcile`` reads a pooled tenant's rows of the shared tables in the bucket and rebuilds its MongoDB projection;
- tenants are discovered from the bucket's prefixes (``lake_tenants``, ``Directory``, ``prune``), listings page;
- ``drop`` after a crash midway (part of a folder's objects already deleted) deletes the rest, without Spark.

The shared tables are seeded with delta-rs (their real schemas and partitions, a few rows), not by a pooled job:
two Spark drivers in all (reconcile, the pooled drop), at a fresh prefix of the bucket.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pymongo import MongoClient
from pyspark.sql.pandas.types import to_arrow_schema

from control.audit import append, audit_row, ensure_table
from metalake.lake_uri import S3Path, delta_rs_uri
from metalake.lease import LEASES
from metalake.s3 import S3Client, lake_s3_client, lake_storage_options
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.single_writer import KEY_PREFIX
from processors.enrichment.tables import POOLED_SPECS
from processors.lake.discover import connect, lake_tenants
from processors.lake.prune import prune_report
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for, pooled_table_path, tenant_bucket
from tests._support.s3it import BUCKET, s3_lake_settings

pytestmark = [pytest.mark.integration, pytest.mark.s3]

ROOT = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.fixture(scope="module")
def s3_settings(settings: Settings, stack: StackManager) -> Settings:
    return s3_lake_settings(settings, stack, "ops")


def _client(s3_settings: Settings) -> S3Client:
    client = lake_s3_client(s3_settings)
    assert client is not None
    return client


def _env(s3_settings: Settings) -> dict[str, str]:
    # The worktree's code first (a child started with -m imports from its working directory and PYTHONPATH).
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "METALAKE_LAKE__ROOT": str(s3_settings.lake_root)}


def _lake(s3_settings: Settings, *args: str) -> dict[str, Any]:
    """``python -m processors.lake ARGS`` on the S3 lake (the worktree's code), its JSON report."""
    done = subprocess.run(
        [sys.executable, "-m", "processors.lake", *args],
        cwd=ROOT,
        env=_env(s3_settings),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def _neighbour(tenant: str) -> str:
    """A fresh tenant id in the same bucket of the shared tables as ``tenant`` (1 in 16 random ids is)."""
    while True:
        other = f"it-{secrets.token_hex(4)}"
        if other != tenant and tenant_bucket(other) == tenant_bucket(tenant):
            return other


def _shared_rows(table: str, rows: list[dict[str, Any]]) -> pa.Table:
    schema = to_arrow_schema(POOLED_SPECS[table].schema, timezone="UTC")
    return pa.Table.from_pylist(rows, schema=schema)


def _seed(s3_settings: Settings, tenants: list[str]) -> dict[str, list[str]]:
    """Two assets and their upsert events per tenant in the shared ``assets`` and ``events`` tables on S3 (as the
    pooled job would hold them); the URNs of each tenant's assets."""
    storage = lake_storage_options(s3_settings)
    urns = {t: [asset_urn("postgres", "s3ops", "db", "public", n) for n in ("orders", "customers")] for t in tenants}
    assets, events = [], []
    for t in tenants:
        for i, urn in enumerate(urns[t]):
            ids = {"tenant_id": t, "tenant_bucket": tenant_bucket(t)}
            event_id = f"{t}-e{i}"
            assets.append(
                {**ids, "urn": urn, "kind": "table", "name": urn.rsplit("/", 1)[1], "platform": "postgres"}
                | {"deleted": False, "version": 1, "event_id": event_id, "event_time": NOW, "updated_at": NOW}
            )
            events.append(
                {**ids, "event_id": event_id, "event_type": "io.metalake.asset.upserted.v1", "subject": urn}
                | {"version": 1, "event_time": NOW, "data": json.dumps({"urn": urn}), "event_date": date(2026, 1, 2)}
            )
    for table, rows in (("assets", assets), ("events", events)):
        write_deltalake(
            delta_rs_uri(pooled_table_path(s3_settings.lake_root, table)),
            _shared_rows(table, rows),
            partition_by=list(POOLED_SPECS[table].partition_by),
            mode="append",
            storage_options=storage,
        )
    return urns


def _held(s3_settings: Settings, table: str, tenant: str) -> list[dict[str, Any]]:
    uri = delta_rs_uri(pooled_table_path(s3_settings.lake_root, table))
    rows = DeltaTable(uri, storage_options=lake_storage_options(s3_settings)).to_pyarrow_table().to_pylist()
    return sorted((r for r in rows if r["tenant_id"] == tenant), key=lambda r: str(r["event_id"]))


def _folder_objects(s3_settings: Settings, names: TenantNames) -> list[str]:
    folder = names.lake_dir
    assert isinstance(folder, S3Path)
    return [k for page in _client(s3_settings).list_objects(folder.bucket, folder.folder) for k in page.keys]


def test_a_pooled_tenant_on_s3_is_reconciled_then_dropped_beside_its_bucket_neighbour(
    s3_settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], tmp_path: Path
) -> None:
    root = s3_settings.lake_root
    assert isinstance(root, S3Path)
    doomed = names_for(tenant, root)
    neighbour = names_for(_neighbour(tenant), root)
    urns = _seed(s3_settings, [doomed.tenant_id, neighbour.tenant_id])
    storage = lake_storage_options(s3_settings)
    for names in (doomed, neighbour):  # as provisioning leaves every tenant: its audit table in its folder
        ensure_table(names.delta_path("audit"), storage)
        append(names.delta_path("audit"), [audit_row("it@s3ops", "tenant.create", names.tenant_id, "done")], storage)
    kept = {t: _held(s3_settings, t, neighbour.tenant_id) for t in ("assets", "events")}
    shared = {t: pooled_table_path(root, t) for t in ("assets", "events")}
    before = {f for p in shared.values() for f in DeltaTable(delta_rs_uri(p), storage_options=storage).file_uris()}
    mongo.drop_database(neighbour.mongo_database)

    # One Spark driver: reconcile the neighbour (its projection rebuilt from its rows of the shared tables in the
    # bucket), then drop the tenant as deprovisioning does (Spark DELETEs under the leases, then its folder).
    out = tmp_path / "reports.json"
    done = subprocess.run(
        [sys.executable, "-m", "tests._support.s3lakeops", neighbour.tenant_id, doomed.tenant_id, str(out)],
        cwd=ROOT,
        env=_env(s3_settings),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    reports = json.loads(out.read_text())

    assets = reports["reconcile"]["collections"][0]
    assert (assets["collection"], assets["delta_rows"], assets["difference"]["missing"]) == ("assets", 2, 2)
    assert assets["upserted"] == 2
    projected = {d["_id"]: d["version"] for d in mongo[neighbour.mongo_database]["assets"].find()}
    assert projected == dict.fromkeys(urns[neighbour.tenant_id], 1)

    dropped = reports["drop"]
    assert (dropped["tier"], dropped["shared_rows"]["assets"], dropped["shared_rows"]["events"]) == ("pooled", 2, 2)
    assert set(dropped["vacuumed"]) == {"_pooled/assets", "_pooled/events"}
    assert dropped["removed"] == [doomed.tenant_id] and dropped["removed_objects"] >= 3  # audit: log and data
    assert _held(s3_settings, "assets", doomed.tenant_id) == [] and _held(s3_settings, "events", doomed.tenant_id) == []
    assert {t: _held(s3_settings, t, neighbour.tenant_id) for t in kept} == kept
    assert _folder_objects(s3_settings, doomed) == []
    # Physically gone: every file that held its rows (one per partition, shared with the neighbour) was rewritten by
    # the DELETE and then purged from the bucket.
    client = _client(s3_settings)
    left = {
        f"s3://{root.bucket}/{k}"
        for p in shared.values()
        for page in client.list_objects(root.bucket, p.folder)
        for k in page.keys
    }
    assert before and not before & left
    leases = mongo[CONTROL_DATABASE][LEASES]
    assert leases.count_documents({"_id": {"$regex": f"^{KEY_PREFIX}s3://{BUCKET}/{root.key}/"}}) == 0  # given back

    # Again, through the CLI as a retried deprovisioning runs it: nothing left, nothing touched, no Spark needed.
    versions = {t: DeltaTable(delta_rs_uri(p), storage_options=storage).version() for t, p in shared.items()}
    again = _lake(s3_settings, "drop", "--yes", "--tenant", doomed.tenant_id)
    assert set(again["shared_rows"].values()) == {0} and set(again["shared_rows"]) == {"assets", "events"}
    assert (again["vacuumed"], again["removed"], again["removed_objects"]) == ([], [], 0)
    assert {t: DeltaTable(delta_rs_uri(p), storage_options=storage).version() for t, p in shared.items()} == versions


def test_tenants_are_discovered_from_the_bucket_and_a_drop_that_crashed_midway_finishes(
    s3_settings: Settings, tenant: str
) -> None:
    # A tenant only the bucket knows: not registered, no MongoDB database, no rows in the shared tables.
    names = names_for(tenant, s3_settings.lake_root, dedicated=True)
    storage = lake_storage_options(s3_settings)
    for i in range(3):
        write_deltalake(
            delta_rs_uri(names.delta_path("assets")), pa.table({"i": [i]}), mode="append", storage_options=storage
        )
    ensure_table(names.delta_path("audit"), storage)
    root = s3_settings.lake_root
    assert isinstance(root, S3Path)
    client = _client(s3_settings)
    assert tenant in lake_tenants(root, client)
    with connect(s3_settings) as directory:
        assert directory.named(tenant).dedicated  # found by its folder, its tier by its own tables
    assert prune_report(s3_settings, tenant, 30)["deleted"] == {tenant: 0}  # prune finds it the same way

    folder = names.lake_dir
    assert isinstance(folder, S3Path)
    objects = _folder_objects(s3_settings, names)
    pages = list(client.list_objects(root.bucket, folder.folder, max_keys=2))
    assert len(pages) > 1 and [k for p in pages for k in p.keys] == objects  # SeaweedFS pages, the client follows

    # A drop that died after deleting part of the folder: the assets table's log is gone, its data files are not.
    log = [k for k in objects if "/assets/_delta_log/" in k]
    assert client.delete_objects(root.bucket, log) == len(log) == 3
    dropped = _lake(s3_settings, "drop", "--yes", "--tenant", tenant)
    assert dropped["removed"] == [tenant] and dropped["removed_objects"] == len(objects) - len(log)
    assert set(dropped["shared_rows"].values()) <= {0} and dropped["vacuumed"] == []  # no rows of it: no Spark
    assert _folder_objects(s3_settings, names) == []
    assert tenant not in lake_tenants(root, client)  # its emptied folder is no tenant, whatever the store lists
    again = _lake(s3_settings, "drop", "--yes", "--tenant", tenant)
    assert (again["removed"], again["removed_objects"]) == ([], 0)
