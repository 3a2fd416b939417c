"""``prune`` deletes only resolved incidents older than the window, from the named tenant only; the CLI runs it. It
touches MongoDB only, so the tenant's tier does not matter: a tenant is known by its projection database too."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from ops.settings import Settings
from processors.lake.prune import prune
from tenants.naming import TenantNames, names_for

pytestmark = pytest.mark.integration

NOW = datetime.now(UTC)


def _incident(doc_id: str, status: str, age_days: int) -> dict[str, Any]:
    return {"_id": doc_id, "status": status, "updated_at": NOW - timedelta(days=age_days), "version": 1}


@pytest.fixture
def incident_tenant(settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]) -> Iterator[TenantNames]:
    names = names_for(tenant, settings.lake_root)
    mongo[names.mongo_database]["incidents"].insert_many(
        [
            _incident("old-resolved", "resolved", 40),
            _incident("recent-resolved", "resolved", 5),
            _incident("old-open", "opened", 40),
            _incident("old-updated", "updated", 90),
        ]
    )
    yield names
    mongo.drop_database(names.mongo_database)


def _ids(mongo: MongoClient[dict[str, Any]], names: TenantNames) -> list[str]:
    return sorted(str(d["_id"]) for d in mongo[names.mongo_database]["incidents"].find({}, {"_id": 1}))


def test_prune_deletes_only_old_resolved_incidents(
    incident_tenant: TenantNames, mongo: MongoClient[dict[str, Any]]
) -> None:
    lines: list[str] = []
    assert prune(mongo, [incident_tenant], 30, echo=lines.append) == {incident_tenant.tenant_id: 1}
    assert _ids(mongo, incident_tenant) == ["old-open", "old-updated", "recent-resolved"]
    assert prune(mongo, [incident_tenant], 30, echo=lines.append) == {incident_tenant.tenant_id: 0}
    assert lines[0] == f"prune {incident_tenant.tenant_id}: 1 resolved incidents older than 30 days"


def test_the_cli_prunes_a_tenant_and_refuses_an_unknown_one(
    settings: Settings, incident_tenant: TenantNames, mongo: MongoClient[dict[str, Any]]
) -> None:
    cli = [sys.executable, "-m", "ops", "lake", "prune"]
    # Known by its MongoDB database alone: no registry entry, no lake folder, no Delta rows.
    assert not incident_tenant.lake_dir.exists()
    done = subprocess.run(
        [*cli, "--tenant", incident_tenant.tenant_id, "--older-than-days", "4"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report == {"older_than_days": 4, "deleted": {incident_tenant.tenant_id: 2}, "total": 2}
    assert _ids(mongo, incident_tenant) == ["old-open", "old-updated"]

    refused = subprocess.run(
        [*cli, "--tenant", "no-such-tenant"], capture_output=True, text=True, timeout=60, check=False
    )
    assert refused.returncode == 2
    assert f"no lake folder at {settings.lake_root / 'no-such-tenant'}" in refused.stderr
    assert "no MongoDB database metalake_no-such-tenant" in refused.stderr
