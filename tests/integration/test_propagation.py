"""Tag propagation on the real stack: a tag event in, propagated tags out in MongoDB and Trino, and a crash.

Each test registers a fresh dedicated tenant and runs its own streaming job (``streamjob.Job``, the code of this
checkout: the shared pooled job may predate the propagated-tag types) and its own propagation processor
(``metalake propagation run --tenant <t>``, a fresh consumer group), both as child processes it may kill. A shared
processor of the stack, if one runs, publishes the same events with the same ids: the assertions allow for it.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.main import JobOptions, _plan
from tenants.naming import CHANGES_TOPIC, TenantNames
from tests._support.itest import trino_rows, wait_for
from tests._support.kafka_tail import mark, read_since
from tests._support.pipeline_procs import PropagationProcess, dedicated_tenant
from tests._support.streamjob import Job, publish_confirmed, settled
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

PROPAGATED = "io.metalake.classification.propagated.v1"


def col(table: str) -> str:
    return f"urn:metalake:postgres:prod/shop/public/{table}/email"


@pytest.fixture
def dedicated(
    settings: Settings, stack: StackManager, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> Iterator[TenantNames]:
    with dedicated_tenant(settings, mongo, tenant) as names:
        yield names


def publish(settings: Settings, names: TenantNames, events: list[CloudEvent]) -> None:
    with EventProducer(settings) as producer:
        publish_confirmed(producer, events, names)


def edge(tenant: str, up: str, down: str, version: int, **extra: Any) -> CloudEvent:
    data = {"upstream": col(up), "urn": col(down), "version": version, **extra}
    return new_event("io.metalake.lineage.edge.added.v1", tenant, data, source="/tests/propagation")


def tag(tenant: str, table: str, version: int, removed: bool = False) -> CloudEvent:
    data: dict[str, Any] = {"urn": col(table), "version": version, "tag": "PII"}
    if removed:
        return new_event("io.metalake.classification.removed.v1", tenant, data, source="/tests/propagation")
    data.update(source="human", propagate=True)
    return new_event("io.metalake.classification.added.v1", tenant, data, source="/tests/propagation")


def live_rows(mongo: MongoClient[dict[str, Any]], names: TenantNames) -> dict[str, tuple[str, list[str], int]]:
    docs = mongo[names.mongo_database]["propagated_tags"].find({"deleted": False})
    return {d["urn"]: (d["origin"], d["path"], d["depth"]) for d in docs}


def trino_propagated(cursor: Any, names: TenantNames) -> list[tuple[Any, ...]] | None:
    return trino_rows(
        cursor,
        f'SELECT urn, tag, origin, path, depth, deleted FROM "{schema_of(names)}".propagated_tags ORDER BY urn',
    )


def test_a_pii_tag_propagates_to_mongodb_and_trino_and_leaves_when_removed(
    settings: Settings,
    dedicated: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    tenant = dedicated.tenant_id
    job = Job(tenant, tmp_path / "job.log")
    processor = PropagationProcess(tenant, tmp_path / "processor.log", f"it-propagation-{tenant}")
    try:
        # users.email -> customers.email -> report.email; users.email -> hashed.email stops PII (a hashing step)
        publish(
            settings,
            dedicated,
            [
                edge(tenant, "users", "customers", 1),
                edge(tenant, "customers", "report", 1),
                edge(tenant, "users", "hashed", 1, blocked_tags=["PII"], transformation="sha256(email)"),
            ],
        )
        lineage = mongo[dedicated.mongo_database]["lineage"]
        wait_for("the lineage in MongoDB", lambda: lineage.count_documents({}) == 3 or None, timeout_s=240)
        processor.wait_ready()
        changes = mark(settings, CHANGES_TOPIC)

        publish(settings, dedicated, [tag(tenant, "users", 100)])
        expected = {
            col("customers"): (col("users"), [col("users"), col("customers")], 1),
            col("report"): (col("users"), [col("users"), col("customers"), col("report")], 2),
        }
        wait_for("propagated tags in MongoDB", lambda: live_rows(mongo, dedicated) == expected or None, timeout_s=120)
        rows = wait_for(
            "propagated tags in Trino",
            lambda: (r := trino_propagated(trino_cursor, dedicated)) and len(r) == 2 and r,
            timeout_s=120,
        )
        assert rows == [
            (col("customers"), "PII", col("users"), [col("users"), col("customers")], 1, False),
            (col("report"), "PII", col("users"), [col("users"), col("customers"), col("report")], 2, False),
        ]
        done = read_since(
            settings,
            CHANGES_TOPIC,
            changes,
            lambda r: (
                r.headers.get("ce_type") == b"io.metalake.propagation.completed.v1"
                and r.headers.get("ce_tenantid") == tenant.encode()
            ),
            expect=1,
            timeout_s=30,
        )
        # One run, one id (the shared stack may run its own `metalake propagation run`: it publishes the same id).
        assert len({r.headers["ce_id"] for r in done}) == 1
        completed = json.loads(done[0].value or b"{}")
        assert (completed["origin"], completed["added"], completed["reached"]) == (
            col("users"),
            [col("customers"), col("report")],
            2,
        )

        # A new edge carries the existing tag across it.
        publish(settings, dedicated, [edge(tenant, "report", "dashboard", 2)])
        wait_for("the tag across the new edge", lambda: col("dashboard") in live_rows(mongo, dedicated), timeout_s=120)
        assert live_rows(mongo, dedicated)[col("dashboard")][2] == 3

        publish(settings, dedicated, [tag(tenant, "users", 101, removed=True)])
        wait_for("propagated tags gone from MongoDB", lambda: live_rows(mongo, dedicated) == {}, timeout_s=120)
        gone = wait_for(
            "tombstones in Trino",
            lambda: (r := trino_propagated(trino_cursor, dedicated)) and all(row[5] for row in r) and r,
            timeout_s=120,
        )
        assert [row[0] for row in gone] == [col("customers"), col("dashboard"), col("report")]
    finally:
        processor.stop()
        job.stop()
    assert processor.proc.returncode == 0, processor.tail()


def test_killed_after_publishing_before_committing_then_restarted_duplicates_no_row(
    settings: Settings,
    dedicated: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    tenant = dedicated.tenant_id
    group = f"it-propagation-{tenant}"
    publish(settings, dedicated, [edge(tenant, "users", "customers", 1), edge(tenant, "customers", "report", 1)])
    publish(settings, dedicated, [tag(tenant, "users", 100)])
    job = Job(tenant, tmp_path / "job-1.log")
    classifications = mongo[dedicated.mongo_database]["classifications"]
    try:
        wait_for("the tag in MongoDB", lambda: classifications.count_documents({}) == 1 or None, timeout_s=240)
        # MongoDB holds the tag before its batch has published the change and committed: stopped in between, the
        # job below would replay the batch and publish the change again (same id; the processor would propagate it
        # twice, deduplicated downstream, but this test counts the processor's own replay).
        projections = [plan.checkpoint for plan in _plan(settings, JobOptions(tenant=tenant)) if plan.pool != "lake"]
        wait_for("the job's projection batches committed", lambda: all(settled(p) for p in projections), timeout_s=120)
    finally:
        job.stop()  # stopped: what the processor publishes now stays in Kafka, unapplied, until the restart below

    marker = tmp_path / "published"
    crashed = PropagationProcess(
        tenant, tmp_path / "processor-1.log", group, env={"METALAKE_FAULTS__PAUSE_AFTER_PUBLISH": str(marker)}
    )
    try:
        wait_for("the processor to publish", lambda: marker.exists() or crashed.proc.poll() is not None, timeout_s=90)
        assert marker.exists(), crashed.tail()
    finally:
        crashed.kill()  # SIGKILL after the events were confirmed, before the offsets were committed
    assert crashed.proc.returncode == -signal.SIGKILL

    restarted = PropagationProcess(tenant, tmp_path / "processor-2.log", group)
    job = Job(tenant, tmp_path / "job-2.log")
    try:
        restarted.wait_ready()
        expected = {col("customers"), col("report")}
        wait_for("propagated tags in MongoDB", lambda: set(live_rows(mongo, dedicated)) == expected, timeout_s=240)
        schema = schema_of(dedicated)
        counts = f"SELECT count(*), count(DISTINCT event_id) FROM \"{schema}\".events WHERE event_type = '{PROPAGATED}'"

        # The restart published the same two events again (same ids): both copies reach the events table (more
        # copies, same ids, if the shared stack runs its own processor too).
        def copies() -> bool:
            rows = trino_rows(trino_cursor, counts)
            return bool(rows and rows[0][0] >= 4)

        wait_for("both copies in the events table", copies, timeout_s=180)
        assert (trino_rows(trino_cursor, counts) or [(0, 0)])[0][1] == 2
        # The lake batch appends events before its MERGEs: wait for the state table too.
        tags = f'SELECT count(*), count(DISTINCT (urn, tag, origin)) FROM "{schema}".propagated_tags'
        wait_for("the propagated tags in Delta", lambda: trino_rows(trino_cursor, tags) == [(2, 2)], timeout_s=120)
        assert mongo[dedicated.mongo_database]["propagated_tags"].count_documents({}) == 2
    finally:
        restarted.stop()
        job.stop()
    # The replay came from the restarted processor itself (the job was stopped while the first one published).
    published = [
        json.loads(line) for line in restarted.log.read_text().splitlines() if '"propagation.published"' in line
    ]
    assert [(p["added"], p["removed"]) for p in published] == [(2, 0)]
