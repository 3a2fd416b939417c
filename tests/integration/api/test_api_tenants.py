"""Tenants through the admin API on the real stack, with real tokens: create (pooled and dedicated), provision, send
an event, query it in Trino, suspend and resume, erase an asset (GDPR), read the audit trail, delete, nothing left.

Create and delete answer 202 and queue the work; the lake worker runs it (here in the test's process, for the test's
tenant: tests/_support/provisioning.py) and the test polls the tenant as a client does, until its queued work is over.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from connectors.runtime.publisher import Publisher
from connectors.runtime.transforms import Routed
from control.connectors.offsets import OffsetStore
from control.erased import urn_hasher
from metalake.kafka.config import client_config
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.launcher import LocalProcessLauncher
from tenants.naming import CONTROL_DATABASE, POOLED_TABLES, TRINO_POOLED_SCHEMA, TenantNames, names_for
from tenants.registry import DELETED_TENANTS_COLLECTION, TenantDirectory, TenantRegistry
from tests._support.itest import trino_rows, wait_for
from tests._support.lakeit import publish, upsert
from tests._support.provisioning import provisioning_worker, settled
from tests._support.tokens import auth_headers
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]


@pytest.fixture
def api(settings: Settings, control: Mongo, tenant: str) -> Iterator[TestClient]:
    with (
        provisioning_worker(settings, control, lambda t: t == tenant),
        TestClient(create_app(settings, mongo=control)) as client,
    ):
        yield client


def _sha(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def _topics(settings: Settings) -> set[str]:
    return set(AdminClient(client_config(settings)).list_topics(timeout=30).topics)


def _trino_schemas(cursor: Any) -> set[str]:
    return {r[0] for r in trino_rows(cursor, "SELECT schema_name FROM information_schema.schemata") or []}


def _control_leftovers(control: Mongo, tenant: str) -> dict[str, int]:
    db = control[CONTROL_DATABASE]
    query = {"$or": [{"tenant": tenant}, {"_id": tenant}, {"_id": {"$regex": f"^{tenant}/"}}]}
    counts = {name: db[name].count_documents(query) for name in db.list_collection_names()}
    return {name: n for name, n in counts.items() if n}


def _assert_nothing_left(settings: Settings, control: Mongo, cursor: Any, names: TenantNames) -> None:
    tenant = names.tenant_id
    assert not names.lake_dir.exists()
    assert not (settings.checkpoint_root / tenant).exists()
    # A MongoDB database exists while it has collections (listDatabases is slow on FerretDB with many databases).
    assert control[names.mongo_database].list_collection_names() == []
    assert schema_of(names) not in _trino_schemas(cursor)
    # No row of the tenant in the shared tables (lake drop deleted them; a dedicated tenant never had any).
    pooled = names_for(tenant, settings.lake_root)
    for table in POOLED_TABLES:
        rows = trino_rows(
            cursor, f'SELECT count(*) FROM "{TRINO_POOLED_SCHEMA}"."{table}" WHERE {pooled.table(table).predicate}'
        )
        assert rows in (None, [(0,)]), (table, rows)
    # Only the tombstone that keeps events still in Kafka from recreating the tenant's data (processors.enrichment).
    assert _control_leftovers(control, tenant) == {DELETED_TENANTS_COLLECTION: 1}
    assert TenantRegistry(control[CONTROL_DATABASE]).get(tenant) is None
    dedicated = names_for(tenant, settings.lake_root, dedicated=True)
    assert {dedicated.priority_topic, dedicated.bulk_topic} & _topics(settings) == set()
    assert {c: o for (t, c), o in OffsetStore(settings).load_all().items() if t == tenant and o} == {}


def _audit(api: TestClient, headers: dict[str, str], path: str, **params: str) -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        query = {**params, "limit": "3", **({"cursor": cursor} if cursor else {})}
        response = api.get(path, params=query, headers=headers)
        assert response.status_code == 200, response.text
        body = response.json()
        items += body["items"]
        cursor = body["next_cursor"]
        if cursor is None:
            return items


def test_pooled_tenant_end_to_end(
    settings: Settings, api: TestClient, control: Mongo, trino_cursor: Any, tenant: str
) -> None:
    admin = auth_headers(api, platform_admin=True)
    names = names_for(tenant, settings.lake_root)
    created = api.post("/v1/tenants", json={"id": tenant, "display_name": "IT pooled"}, headers=admin)
    assert created.status_code == 202, created.text
    assert created.headers["location"] == f"/v1/tenants/{tenant}"
    assert created.json()["state"] == "provisioning" and created.json()["queued_at"] is not None
    view = settled(api, tenant, admin)
    assert view is not None and view["state"] == "active", view
    assert view["tier"] == "pooled"
    assert view["provisioning"] == {"done": ["access", "control", "lake", "mongo", "offsets", "trino"], "pending": []}
    assert view["trino_schema"] == schema_of(names)  # keyed: the tenant learns it here, not from its id
    # Queryable before any event: the tables are registered in Trino.
    assert trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema_of(names)}".assets') == [(0,)]
    assert {"assets", "classifications", "lineage", "incidents"} <= set(
        control[names.mongo_database].list_collection_names()
    )
    again = api.post("/v1/tenants", json={"id": tenant}, headers=admin)
    assert again.status_code == 409 and again.json()["field"] == "id"

    # An event through the pooled topics reaches the tenant's tables.
    table = asset_urn("postgres", "it", "shop", "public", "customers")
    publish(settings, [upsert(tenant, table, kind="table", name="customers")])
    wait_for(
        "the asset in Trino",
        lambda: trino_rows(trino_cursor, f'SELECT urn FROM "{schema_of(names)}".assets') == [(table,)],
        timeout_s=300,
        interval_s=1,
    )

    # Suspended: the tenant's own tokens are refused; resumed: accepted again.
    mine = auth_headers(api, tenant=tenant, role="admin")
    assert api.get(f"/v1/tenants/{tenant}", headers=mine).status_code == 200
    assert api.post(f"/v1/tenants/{tenant}/suspend", headers=mine).status_code == 403  # platform:admin only
    suspended = api.post(f"/v1/tenants/{tenant}/suspend", headers=admin)
    assert suspended.status_code == 200 and suspended.json()["state"] == "suspended"
    refused = api.get(f"/v1/tenants/{tenant}", headers=mine)
    assert refused.status_code == 403 and refused.json()["type"] == "/problems/tenant-suspended"
    assert api.post(f"/v1/tenants/{tenant}/resume", headers=admin).json()["state"] == "active"
    assert api.post(f"/v1/tenants/{tenant}/resume", headers=admin).status_code == 200  # idempotent
    assert api.get(f"/v1/tenants/{tenant}", headers=mine).status_code == 200

    tier = api.patch(f"/v1/tenants/{tenant}", json={"tier": "dedicated"}, headers=admin)
    assert tier.status_code == 409 and tier.json()["field"] == "tier"
    patched = api.patch(
        f"/v1/tenants/{tenant}", json={"display_name": "IT", "settings": {"region": "eu"}}, headers=admin
    )
    assert patched.status_code == 200 and patched.json()["settings"] == {"region": "eu"}

    # GDPR erase through the API: 202 (queued), then the stack's lake worker runs it (the API starts no Spark), the
    # status resource says done, and the asset is gone everywhere.
    bad = api.post(f"/v1/tenants/{tenant}/erasures", json={"urn": "not a urn"}, headers=mine)
    assert bad.status_code == 422 and bad.json()["field"] == "urn" and "not a urn" not in bad.text
    erasure = api.post(f"/v1/tenants/{tenant}/erasures", json={"urn": table}, headers=mine)
    assert erasure.status_code == 202, erasure.text
    assert erasure.json()["state"] == "accepted"

    def finished() -> dict[str, Any] | None:
        body: dict[str, Any] = api.get(erasure.headers["location"], headers=mine).json()
        return body if body["state"] in ("done", "failed") else None

    # The erase's Spark start, DELETEs, VACUUMs and grace period: minutes on the shared 2-core machine.
    status = wait_for("the lake worker to run the erasure", finished, timeout_s=900, interval_s=2.0)
    assert status["state"] == "done", status
    # The URN's keyed hash (issue 21, item 14), not its plain sha256: not testable against guessed URNs.
    assert status["target_hash"] == urn_hasher(settings).digest(table) != _sha(table)
    assert status["counts"]["delta.assets"] == 1
    assert table not in json.dumps(status)
    assert trino_rows(trino_cursor, f'SELECT count(*) FROM "{schema_of(names)}".assets') == [(0,)]
    assert control[names.mongo_database]["assets"].count_documents({}) == 0
    other = auth_headers(api, tenant=f"{tenant}-x", role="admin")
    assert api.get(erasure.headers["location"].replace(tenant, f"{tenant}-x"), headers=other).status_code == 404
    assert api.get(erasure.headers["location"], headers=other).status_code == 404
    control[CONTROL_DATABASE]["clients"].delete_many({"tenant": f"{tenant}-x"})

    # The audit trail: every action, newest first, paged; the erased URN appears only as its hash.
    trail = _audit(api, mine, f"/v1/tenants/{tenant}/audit")
    actions = [r["action"] for r in trail]
    for expected in ("tenant.provision", "tenant.suspend", "tenant.resume", "tenant.update", "erasure.request"):
        assert expected in actions, actions
    assert {"erasure.finish", "erase.asset"} <= set(actions)
    assert [r["at"] for r in trail] == sorted((r["at"] for r in trail), reverse=True)
    about_table = _audit(api, mine, f"/v1/tenants/{tenant}/audit", target=table)
    assert {r["action"] for r in about_table} == {"erasure.request", "erasure.finish", "erase.asset"}
    assert [r["result"] for r in _audit(api, mine, f"/v1/tenants/{tenant}/audit", action="tenant.update")] == [
        "done",
        "refused",
    ]
    raw = "".join(p.read_text(errors="replace") for p in names.delta_path("audit").rglob("*") if p.is_file())
    assert table not in raw
    in_trino = trino_rows(trino_cursor, f'SELECT action, target_hash FROM "{schema_of(names)}".audit')
    assert ("erasure.request", urn_hasher(settings).digest(table)) in (in_trino or [])
    assert not any(h == _sha(table) for _, h in in_trino or [])

    # Delete: confirmation required, then everything goes, the offsets of a connector deleted before too.
    OffsetStore(settings).store(tenant, "deleted-before", {"public.customers": {"lsn": 7}})
    unconfirmed = api.delete(f"/v1/tenants/{tenant}", params={"confirm": "nope"}, headers=admin)
    assert unconfirmed.status_code == 422 and unconfirmed.json()["field"] == "confirm"
    deleted = api.delete(f"/v1/tenants/{tenant}", params={"confirm": tenant}, headers=admin)
    assert deleted.status_code == 202 and deleted.json()["state"] == "deleting"
    assert settled(api, tenant, admin) is None
    assert api.get(f"/v1/tenants/{tenant}", headers=admin).status_code == 404
    _assert_nothing_left(settings, control, trino_cursor, names)
    platform = _audit(api, admin, "/v1/audit", target=tenant)
    assert [r["action"] for r in platform][:2] == ["tenant.deprovision", "tenant.delete"]
    assert platform[0]["result"] == "done"


def test_dedicated_tenant_gets_its_topics_and_streaming_query(
    settings: Settings, api: TestClient, control: Mongo, trino_cursor: Any, tenant: str
) -> None:
    admin = auth_headers(api, platform_admin=True)
    names = names_for(tenant, settings.lake_root, dedicated=True)
    launcher = LocalProcessLauncher(settings)
    created = api.post("/v1/tenants", json={"id": tenant, "tier": "dedicated"}, headers=admin)
    assert created.status_code == 202, created.text
    try:
        view = settled(api, tenant, admin)
        assert view is not None and view["state"] == "active", view
        steps = {"topics", "lake", "trino", "mongo", "control", "offsets", "stream", "access"}
        assert set(view["provisioning"]["done"]) == steps
        assert {names.priority_topic, names.bulk_topic} <= _topics(settings)
        assert launcher.status(tenant).state in {"starting", "running"}

        # The connector publisher routes the tenant's events to its own topics (through the tenants registry).
        table = asset_urn("postgres", "it", "shop", "public", "orders")
        directory = TenantDirectory(TenantRegistry(control[CONTROL_DATABASE]), settings.lake_root)
        publisher = Publisher(settings, directory=directory)
        try:
            deliveries = publisher.publish([Routed(upsert(tenant, table, kind="table", name="orders"), "priority")])
        finally:
            publisher.close()
        assert [d.topic for d in deliveries] == [names.priority_topic]
        wait_for(
            "the dedicated job to write the asset",
            lambda: trino_rows(trino_cursor, f'SELECT urn FROM "{schema_of(names)}".assets') == [(table,)],
            timeout_s=300,
            interval_s=2,
        )
        assert launcher.status(tenant).state == "running"
    finally:
        deleted = api.delete(f"/v1/tenants/{tenant}", params={"confirm": tenant}, headers=admin)
        assert deleted.status_code == 202, deleted.text
        assert settled(api, tenant, admin) is None
    assert launcher.status(tenant).state == "stopped"
    assert not launcher.run_dir(tenant).exists()
    _assert_nothing_left(settings, control, trino_cursor, names)
