"""Effectively once under a crash: the driver is killed between the two queries' stores (Delta, then MongoDB).

The test runs its own streaming job for a dedicated tenant (``streamjob.Job``: its own topics and checkpoint), so the
shared pooled job cannot touch its data, and kills it with SIGKILL from inside the batch
(METALAKE_FAULTS__KILL_AFTER_DELTA with the projection held back by METALAKE_FAULTS__LAKE_ONLY, or
METALAKE_FAULTS__KILL_AFTER_MONGO). The other fault tests are in ``test_faults_*.py``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import TenantNames, names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.streamjob import Job, kill_after_delta_commit_then_restart
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration


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
    kill_after_delta_commit_then_restart(settings, dedicated, mongo, trino_cursor, tmp_path)


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
        schema = schema_of(dedicated)
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
