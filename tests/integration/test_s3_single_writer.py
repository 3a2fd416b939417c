"""The single-writer rule of a lake on S3, enforced by the writer leases (``processors.enrichment.single_writer``),
on the local stack's SeaweedFS and FerretDB:

- two Spark drivers racing their appends on one Delta table, each commit under the table's lease, lose nothing
  (without the lease they do: Spark's S3 log store is single-driver; the figure is in docs/production.md);
- ``maintain`` and ``erase`` (the CLI, each its own Spark driver) run on a dedicated tenant's tables while that
  tenant's streaming job keeps writing them: every event is in Delta afterwards, the erased URN nowhere.

Three extra Spark drivers and one job, all stopped at the end; the session's pooled job and local lake are untouched.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.lake_uri import S3Path, delta_rs_uri
from metalake.lease import LEASES
from metalake.s3 import lake_storage_options
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.single_writer import KEY_PREFIX
from processors.lake.maintain import Target, maintain_delta_rs
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for
from tests._support.itest import wait_for
from tests._support.s3it import s3_lake_settings
from tests._support.streamjob import Job, publish_confirmed

pytestmark = [pytest.mark.integration, pytest.mark.s3]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def s3_settings(settings: Settings, stack: StackManager) -> Settings:
    return s3_lake_settings(settings, stack, "sw")


def _env(s3_settings: Settings) -> dict[str, str]:
    # The worktree's code first (a child started with -m imports from its working directory and PYTHONPATH).
    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    return {**os.environ, "PYTHONPATH": path, "METALAKE_LAKE__ROOT": str(s3_settings.lake_root)}


def _rows(s3_settings: Settings, path: S3Path, columns: list[str]) -> list[dict[str, Any]]:
    storage = lake_storage_options(s3_settings)
    try:
        table = DeltaTable(delta_rs_uri(path), storage_options=storage)
    except Exception:  # noqa: BLE001 - not created yet
        return []
    return list(pa.table(table.to_pyarrow_table(columns=columns)).to_pylist())


def test_two_spark_drivers_racing_on_one_s3_table_lose_nothing_under_the_writer_lease(
    s3_settings: Settings, tmp_path: Path, mongo: MongoClient[dict[str, Any]]
) -> None:
    root = s3_settings.lake_root
    assert isinstance(root, S3Path)
    table = root / "_race" / "appends"
    storage = lake_storage_options(s3_settings)
    write_deltalake(
        delta_rs_uri(table),
        pa.table({"writer": pa.array([], pa.string()), "i": pa.array([], pa.int32())}),
        storage_options=storage,
    )
    writers, appends = 2, 6
    drivers = [
        subprocess.Popen(
            [sys.executable, "-m", "tests._support.s3race", str(table), f"w{w}", str(appends), str(tmp_path)],
            cwd=ROOT,
            env=_env(s3_settings),
            stdout=(tmp_path / f"w{w}.log").open("wb"),
            stderr=subprocess.STDOUT,
        )
        for w in range(writers)
    ]
    try:
        wait_for(
            "both drivers' Spark sessions",
            lambda: (
                all((tmp_path / f"w{w}.ready").exists() for w in range(writers))
                or (None if all(d.poll() is None for d in drivers) else pytest.fail(_logs(tmp_path, writers)))
            ),
            timeout_s=240,
        )
        (tmp_path / "go").write_text("go")  # both start appending at once
        codes = [d.wait(timeout=240) for d in drivers]
    finally:
        for d in drivers:
            d.kill() if d.poll() is None else None
    assert codes == [0] * writers, _logs(tmp_path, writers)
    held = DeltaTable(delta_rs_uri(table), storage_options=storage)
    rows = {(r["writer"], r["i"]) for r in pa.table(held.to_pyarrow_table()).to_pylist()}
    assert rows == {(f"w{w}", i) for w in range(writers) for i in range(appends)}
    assert held.version() == writers * appends  # one version per commit after the creation: none overwritten
    # Every lease was given back.
    key = KEY_PREFIX + table.uri("s3")
    assert mongo[CONTROL_DATABASE][LEASES].find_one({"_id": key}) is None


def _logs(tmp_path: Path, writers: int) -> str:
    return "\n".join((tmp_path / f"w{w}.log").read_text(errors="replace")[-2000:] for w in range(writers))


def _upserts(tenant: str, names: list[str]) -> list[CloudEvent]:
    return [
        new_event(
            "io.metalake.asset.upserted.v1",
            tenant,
            {"urn": asset_urn("postgres", "s3", "db", "public", n), "version": 1, "kind": "table", "name": n},
            source="/tests/s3-single-writer",
        )
        for n in names
    ]


@pytest.fixture
def dedicated_on_s3(s3_settings: Settings, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, s3_settings.lake_root, dedicated=True)
    ensure_topics(s3_settings, [names.priority_topic, names.bulk_topic])
    yield names


def _lake_command(s3_settings: Settings, *args: str) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "processors.lake", *args],
        cwd=ROOT,
        env=_env(s3_settings),
        capture_output=True,
        text=True,
        timeout=600,  # an erase beside the writing job took over 300 s on a loaded 2-core machine (2026-11-30)
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    report: dict[str, Any] = json.loads(done.stdout)
    return report


def test_maintain_and_erase_on_s3_while_the_owning_job_writes_lose_no_event(
    s3_settings: Settings,
    dedicated_on_s3: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    tmp_path: Path,
) -> None:
    names = dedicated_on_s3
    tenant = names.tenant_id
    before = _upserts(tenant, [f"a{i}" for i in range(12)])
    during: list[CloudEvent] = []
    erased = asset_urn("postgres", "s3", "db", "public", "a3")
    events_path, assets_path = names.delta_path("events"), names.delta_path("assets")
    with EventProducer(s3_settings) as producer:
        publish_confirmed(producer, before, names)
        job = Job(tenant, tmp_path / "job.log", env=_env(s3_settings))
        try:
            job.wait_ready(timeout_s=240)
            wait_for(
                "the first events in Delta on S3",
                lambda: len(_rows(s3_settings, events_path, ["event_id"])) == len(before) or None,
                timeout_s=240,
            )
            # The job keeps getting events (a batch every second or so) while maintain and erase run.
            stop = threading.Event()

            def publish_during() -> None:
                # Until both commands are done: the job has batches to write all along.
                chunk = 0
                while not stop.is_set():
                    events = _upserts(tenant, [f"b{chunk}_{i}" for i in range(3)])
                    publish_confirmed(producer, events, names)
                    during.extend(events)
                    chunk += 1
                    stop.wait(1.5)

            publisher = threading.Thread(target=publish_during, name="publish-during")
            publisher.start()
            try:
                # A few of the job's batches first: small files for OPTIMIZE to compact.
                wait_for(
                    "two more batches in Delta",
                    lambda: len(_rows(s3_settings, events_path, ["event_id"])) >= len(before) + 6 or None,
                    timeout_s=120,
                )
                maintained = _lake_command(s3_settings, "maintain", "--tenant", tenant)
                report = _lake_command(
                    s3_settings, "erase", "--tenant", tenant, "--urn", erased, "--actor", "it-s3", "--yes"
                )
            finally:
                stop.set()
                publisher.join(timeout=120)
            expected = {e.id for e in before if e.data["urn"] != erased} | {e.id for e in during}
            expected_assets = len(before) - 1 + len(during)
            wait_for(
                "every event but the erased asset's, and its asset, in Delta on S3",
                lambda: (
                    (
                        {r["event_id"] for r in _rows(s3_settings, events_path, ["event_id"])} >= expected
                        and len(_rows(s3_settings, assets_path, ["urn"])) >= expected_assets
                    )
                    or None
                ),
                timeout_s=240,
            )
            assert job.alive, job.tail()
        finally:
            job.stop()
    tables = {t["table"]: t for t in maintained["tables"]}
    assert {"events", "assets"} <= set(tables) and tables["events"]["compacted"] > 0
    assert report["delta_rows"]["events"] == 1 and report["delta_rows"]["assets"] == 1
    events = _rows(s3_settings, events_path, ["event_id", "subject"])
    assert {r["event_id"] for r in events} == expected  # nothing lost, nothing of the erased asset left
    assert len(events) == len(expected)  # and nothing twice
    assets = {r["urn"] for r in _rows(s3_settings, assets_path, ["urn"])}
    assert erased not in assets and len(assets) == expected_assets
    assert mongo[names.mongo_database]["assets"].find_one({"_id": erased}) is None
    # The three drivers took turns on the tables: the job's appends, maintain's OPTIMIZE, the erase's DELETE.
    history = DeltaTable(delta_rs_uri(events_path), storage_options=lake_storage_options(s3_settings)).history()
    operations = [h["operation"] for h in sorted(history, key=lambda h: h["version"])]
    assert operations.count("OPTIMIZE") == 1 and operations.count("DELETE") == 1
    assert "WRITE" in operations[operations.index("OPTIMIZE") + 1 :], operations  # the job went on writing
    # The audit table the erase appended to (delta-rs writers, no lease) is maintained with delta-rs on S3.
    audit = maintain_delta_rs(
        Target(tenant, "audit", names.delta_path("audit")), 168, lake_storage_options(s3_settings)
    )
    assert audit is not None and audit.files_after >= 1
    # The job's batches took the leases, and waited for the commands' (its log: the batch step and the wait).
    log = job.log.read_text(errors="replace")
    assert '"writer_lease"' in log and "lake.writer_lease_wait" in log
    # The job held the leases batch by batch and gave them back when it stopped.
    assert mongo[CONTROL_DATABASE][LEASES].count_documents({"_id": {"$regex": f"^{KEY_PREFIX}.*/{tenant}/"}}) == 0
