"""Incidents resolved to their asset's health, on the real stack: Delta ``assets``, MongoDB ``assets`` and Trino.

Two overlapping incidents on one table: the first arrives before the catalog knows the table; the table is degraded
until both are resolved. Duplicated and out-of-order incident events change nothing, and a batch replayed after a
kill between the Delta commit and MongoDB (``METALAKE_FAULTS__KILL_AFTER_DELTA``) lands its health exactly once.
Owners and descriptions carry over an upsert that leaves them out. One dedicated-tenant job (``streamjob.Job``).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import TenantNames, names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.streamjob import Job, next_batch_id, publish_confirmed, txn_versions
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

TABLE = asset_urn("snowflake", "acme-prod", "zeus", "ares", "artemis")
HEALTH = ("health", "health_severity", "open_incidents", "open_incident_ids")


@pytest.fixture
def dedicated(settings: Settings, stack: StackManager, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    yield names


def _incident(tenant: str, incident_id: str, status: str, version: int, severity: str | None) -> CloudEvent:
    return new_event(
        f"com.montecarlodata.incident.{status}.v1",
        tenant,
        {"urn": TABLE, "version": version, "incident_id": incident_id, "status": status, "severity": severity},
        source="/tests/health",
    )


def _asset(tenant: str, version: int, **data: Any) -> CloudEvent:
    return new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": TABLE, "version": version, "kind": "table", "name": "artemis", **data},
        source="/tests/health",
    )


def _publish(settings: Settings, names: TenantNames, events: Sequence[CloudEvent]) -> None:
    with EventProducer(settings) as producer:
        publish_confirmed(producer, events, names)


def _mongo_health(db: Any) -> tuple[Any, ...] | None:
    doc = db["assets"].find_one({"_id": TABLE})
    return None if doc is None or "health" not in doc else tuple(doc.get(c) for c in HEALTH)


def _delta_health(cursor: Any, schema: str) -> tuple[Any, ...] | None:
    rows = trino_rows(cursor, f'SELECT {", ".join(HEALTH)} FROM "{schema}".assets WHERE urn = ?', [TABLE])
    return rows[0] if rows else None


def _wait_health(db: Any, expected: tuple[Any, ...], job: Job) -> None:
    def probe() -> bool:
        if not job.alive:
            raise AssertionError(f"the job died:\n{job.tail()}")
        return _mongo_health(db) == expected

    wait_for(f"health {expected} in MongoDB", probe, timeout_s=300)


def test_two_overlapping_incidents_degrade_the_table_until_both_are_resolved_exactly_once(
    settings: Settings,
    dedicated: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    tenant, schema = dedicated.tenant_id, schema_of(dedicated)
    db = mongo[dedicated.mongo_database]
    query = f"metalake-dedicated-{tenant}-lake"
    checkpoint = dedicated.checkpoint_dir(settings.checkpoint_root, query)

    job = Job(tenant, tmp_path / "job-1.log")
    try:
        job.wait_ready()
        # Incident A names a table the catalog does not know yet: no asset row appears for it.
        a_open = _incident(tenant, "a", "opened", 100, "SEV-3")
        _publish(settings, dedicated, [a_open])
        wait_for("incident a in MongoDB", lambda: db["incidents"].find_one({"_id": f"a|{TABLE}"}), timeout_s=300)
        assert db["assets"].find_one({"_id": TABLE}) is None
        count = wait_for(
            "the tables in Trino", lambda: trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema}".assets')
        )
        assert count == [(0,)]

        # The table arrives later and picks its open incident up.
        _publish(settings, dedicated, [_asset(tenant, 1, description="Orders", owners=["a@acme.example"])])
        _wait_health(db, ("degraded", "SEV-3", 1, ["a"]), job)

        # A second, worse incident overlaps; incident A's opening is delivered again.
        _publish(settings, dedicated, [_incident(tenant, "b", "opened", 110, "SEV-1"), a_open, a_open])
        _wait_health(db, ("degraded", "SEV-1", 2, ["a", "b"]), job)
    finally:
        job.stop()
    assert job.proc.returncode == 0, job.tail()

    # B's resolution, in a lake batch killed after its Delta commits (health included), MongoDB held back.
    batch = next_batch_id(checkpoint)
    crashed = Job(
        tenant,
        tmp_path / "job-2.log",
        env={"METALAKE_FAULTS__KILL_AFTER_DELTA": str(batch), "METALAKE_FAULTS__LAKE_ONLY": "1"},
    )
    crashed.wait_ready()
    b_resolved = _incident(tenant, "b", "resolved", 120, "SEV-1")
    _publish(settings, dedicated, [b_resolved])
    crashed.wait_exit(timeout_s=240)
    assert (f"{query}.health", batch) in txn_versions(dedicated.delta_path("assets"))
    assert _delta_health(trino_cursor, schema) == ("degraded", "SEV-3", 1, ["a"])
    assert _mongo_health(db) == ("degraded", "SEV-1", 2, ["a", "b"])

    job = Job(tenant, tmp_path / "job-3.log")
    try:
        job.wait_ready()
        _wait_health(db, ("degraded", "SEV-3", 1, ["a"]), job)
        assert txn_versions(dedicated.delta_path("assets")).count((f"{query}.health", batch)) == 1

        # Out of order and duplicated: an update of A older than its opening, B's resolution again; and an upsert of
        # the table that leaves its description and owners out (they carry over).
        _publish(
            settings,
            dedicated,
            [_incident(tenant, "a", "updated", 50, "SEV-1"), b_resolved, _asset(tenant, 2, name="artemis")],
        )
        wait_for(
            "asset version 2 in MongoDB", lambda: db["assets"].find_one({"_id": TABLE, "version": 2}), timeout_s=300
        )
        assert _mongo_health(db) == ("degraded", "SEV-3", 1, ["a"])

        _publish(settings, dedicated, [_incident(tenant, "a", "resolved", 130, "SEV-3")])
        _wait_health(db, ("healthy", None, 0, []), job)
        # The projection queries lead the lake query: Delta gets there in its own batch.
        wait_for(
            "the healthy table in Delta",
            lambda: _delta_health(trino_cursor, schema) == ("healthy", None, 0, []) or None,
            timeout_s=300,
        )
    finally:
        job.stop()
    assert job.proc.returncode == 0, job.tail()

    assert _delta_health(trino_cursor, schema) == ("healthy", None, 0, [])
    delta = trino_rows(
        trino_cursor,
        f'SELECT version, description, owners, health_version FROM "{schema}".assets WHERE urn = ?',
        [TABLE],
    )
    doc = db["assets"].find_one({"_id": TABLE})
    assert doc is not None
    assert delta == [(2, "Orders", ["a@acme.example"], 130)]
    assert (doc["version"], doc["description"], doc["owners"], doc["health_version"]) == delta[0]
    incidents = trino_rows(
        trino_cursor, f'SELECT incident_id, status, version FROM "{schema}".incidents ORDER BY incident_id'
    )
    assert incidents == [("a", "resolved", 130), ("b", "resolved", 120)]
