"""Effectively once under a crash: the driver is killed between the two queries' stores (Delta, then MongoDB).

The test runs its own streaming job for a dedicated tenant (``streamjob.Job``: its own topics and checkpoint), so the
shared pooled job cannot touch its data, and kills it with SIGKILL from inside the batch
(METALAKE_FAULTS__KILL_AFTER_DELTA with the projection held back by METALAKE_FAULTS__LAKE_ONLY, or
METALAKE_FAULTS__KILL_AFTER_MONGO). The other fault tests are in ``test_faults_*.py``.
"""

from __future__ import annotations

import json
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from itest import trino_rows, wait_for
from pymongo import MongoClient
from streamjob import Job, txn_versions

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer, ensure_topics
from metalake.settings import Settings
from metalake.urn import asset_urn
from ops.stack import StackManager
from tenants.naming import TenantNames, names_for

pytestmark = pytest.mark.integration


def _events(tenant: str, n_tables: int) -> list[CloudEvent]:
    # Tables only: they all ride the priority topic, so only the priority query has a batch 0 to crash in.
    out = []
    for t in range(n_tables):
        table = asset_urn("postgres", "faults", "db", "public", f"t{t}")
        out.append(
            new_event(
                "io.metalake.asset.upserted.v1",
                tenant,
                {"urn": table, "version": 10, "kind": "table", "name": f"t{t}"},
                source="/tests/faults",
            )
        )
    return out


@pytest.fixture
def dedicated(settings: Settings, stack: StackManager, tenant: str) -> Iterator[TenantNames]:
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    yield names


def test_kill_after_delta_commit_then_restart_loses_and_duplicates_nothing(
    settings: Settings,
    dedicated: TenantNames,
    mongo: MongoClient[dict[str, Any]],
    trino_cursor: Any,
    tmp_path: Path,
) -> None:
    tenant = dedicated.tenant_id
    events = _events(tenant, n_tables=12)
    with EventProducer(settings) as producer:
        producer.publish(events, lambda e: dedicated.topic(spec_for(e.type).topic_class(e.data)))

    crashed = Job(
        tenant,
        tmp_path / "job-1.log",
        env={"METALAKE_FAULTS__KILL_AFTER_DELTA": "0", "METALAKE_FAULTS__LAKE_ONLY": "1"},
    )
    try:
        code = crashed.proc.wait(timeout=300)
    finally:
        crashed.stop()
    assert code == -signal.SIGKILL, (tmp_path / "job-1.log").read_text()[-3000:]
    # The crash window: batch 0 is in Delta (events and assets), MongoDB has nothing yet.
    query = f"metalake-dedicated-{tenant}-lake"
    assert (query, 0) in txn_versions(dedicated.delta_path("events"))
    assert (query, 0) in txn_versions(dedicated.delta_path("assets"))
    assets = mongo[dedicated.mongo_database]["assets"]
    assert assets.count_documents({}) == 0

    restarted = Job(tenant, tmp_path / "job-2.log")
    try:
        wait_for("MongoDB after the replay", lambda: assets.count_documents({}) == len(events) or None, timeout_s=240)
        schema = dedicated.trino_schema
        # The replay of batch 0 is skipped by Delta; the lake query's next batches hold nothing new either.
        wait_for(
            "every asset in Delta",
            lambda: trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema}".assets') == [(len(events),)] or None,
            timeout_s=240,
        )
    finally:
        restarted.stop()

    # Replaying batch 0 added no second commit for it: Delta skipped it by its (appId, version).
    assert txn_versions(dedicated.delta_path("events")).count((query, 0)) == 1
    schema = dedicated.trino_schema
    count = trino_rows(trino_cursor, f'SELECT count(*), count(DISTINCT event_id) FROM "{schema}".events')
    assert count == [(len(events), len(events))]
    delta_assets = trino_rows(trino_cursor, f'SELECT urn, version, event_id FROM "{schema}".assets ORDER BY urn')
    mongo_assets = sorted((d["_id"], d["version"], d["event_id"]) for d in assets.find({}))
    assert delta_assets == mongo_assets
    assert len(mongo_assets) == len(events)


def test_a_dedicated_job_dead_letters_another_tenants_records(
    settings: Settings, dedicated: TenantNames, mongo: MongoClient[dict[str, Any]], trino_cursor: Any, tmp_path: Path
) -> None:
    tenant = dedicated.tenant_id
    intruder = new_event(
        "io.metalake.asset.upserted.v1",
        "someone-else",
        {"urn": asset_urn("pg", "x", "db"), "version": 1, "kind": "database", "name": "db"},
        source="/tests/faults",
    )
    own = new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": asset_urn("pg", "x", "own"), "version": 1, "kind": "database", "name": "own"},
        source="/tests/faults",
    )
    with EventProducer(settings) as producer:
        producer.publish([intruder, own], lambda e: dedicated.priority_topic)
    job = Job(tenant, tmp_path / "job.log")
    try:
        assets = mongo[dedicated.mongo_database]["assets"]
        wait_for("the tenant's own event", lambda: assets.find_one({"_id": own.data["urn"]}), timeout_s=240)
        schema = dedicated.trino_schema
        dlq = wait_for(
            "the intruder in the tenant's DLQ",
            lambda: trino_rows(trino_cursor, f'SELECT reason, field, raw_headers FROM "{schema}"."_dlq"'),
        )
    finally:
        job.stop()
    [(reason, field, raw_headers)] = dlq
    assert (reason, field) == ("ce_tenantid does not match the topic's tenant", "ce_tenantid")
    # Like any dead letter: the raw headers are kept with the raw key and value (they were in the tenant's topic).
    assert json.loads(raw_headers)["ce_id"] == intruder.id
    assert assets.count_documents({}) == 1
    # Not listDatabases: FerretDB sizes every database for it, which takes minutes once tests made thousands.
    assert mongo["metalake_someone-else"].list_collection_names() == []
