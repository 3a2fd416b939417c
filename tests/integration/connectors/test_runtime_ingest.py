"""The ingest API on the real stack: per-event results, only the valid events in Kafka, write keys made through the
admin API, and OAuth access tokens of the admin API's authorization server (events:write)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.services.audit import tenant_audit_path
from control.audit import AuditQuery, read
from metalake.urn import asset_urn
from ops.settings import Settings
from tenants.model import Tier
from tenants.naming import BULK_TOPIC, CONTROL_DATABASE, PRIORITY_TOPIC, names_for
from tenants.registry import TenantRegistry, TenantState
from tenants.trino_schemas import trino_schema
from tests._support.itest import wait_for
from tests._support.kafka_tail import mark, of_tenant, read_since
from tests._support.tokens import auth_headers
from tests._support.worker_helpers import tenant_admin

pytestmark = pytest.mark.integration


def _event(tenant: str, i: int, kind: str = "table") -> dict[str, Any]:
    path = ("db", "public", "orders", f"c{i}") if kind == "column" else ("db", "public", f"t{i}")
    return {
        "specversion": "1.0",
        "id": f"ingest-{i}",
        "source": "/producers/it",
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": tenant,
        "data": {"urn": asset_urn("pg", "it", *path), "version": i, "kind": kind, "name": f"x{i}"},
    }


def _write_key(api: TestClient, tenant: str) -> str:
    response = api.post(f"/v1/tenants/{tenant}/write-keys", headers=tenant_admin(api, tenant))
    assert response.status_code == 201, response.text
    key: str = response.json()["key"]
    return key


def test_mixed_array_publishes_only_the_valid_events(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    key = _write_key(api, tenant)
    invalid = _event(tenant, 2)
    invalid["data"]["kind"] = "galaxy"
    foreign = _event("someone-else", 3)
    body = [_event(tenant, 1), invalid, foreign, _event(tenant, 4, kind="column")]
    marks = mark(settings, PRIORITY_TOPIC), mark(settings, BULK_TOPIC)
    response = worker.post("/v1/events", json=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["accepted", "rejected", "rejected", "accepted"]
    assert results[1]["error"]["field"] == "data/kind"
    assert results[2]["error"]["field"] == "tenantid"
    priority = read_since(settings, PRIORITY_TOPIC, marks[0], of_tenant(tenant), expect=1)
    bulk = read_since(settings, BULK_TOPIC, marks[1], of_tenant(tenant), expect=1)
    assert [r.headers["ce_id"] for r in priority] == [b"ingest-1"]
    assert [r.headers["ce_id"] for r in bulk] == [b"ingest-4"]
    # Only the hash of the key is stored.
    stored = list(mongo[CONTROL_DATABASE]["connector_secrets"].find({"tenant": tenant}))
    assert stored and key not in json.dumps(stored, default=str)
    assert key.split("_", 2)[2] not in json.dumps(stored, default=str)


def test_ndjson_with_the_header_key(worker: TestClient, api: TestClient, settings: Settings, tenant: str) -> None:
    key = _write_key(api, tenant)
    marks = mark(settings, PRIORITY_TOPIC)
    body = "\n".join(json.dumps(_event(tenant, i)) for i in range(3)) + "\n"
    response = worker.post(
        "/v1/events", content=body, headers={"X-Metalake-Write-Key": key, "Content-Type": "application/x-ndjson"}
    )
    assert response.json()["accepted"] == 3
    assert len(read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=3)) == 3


def test_write_keys_are_listed_by_id_and_a_wrong_or_revoked_one_is_401(
    worker: TestClient, api: TestClient, tenant: str
) -> None:
    admin = tenant_admin(api, tenant)
    created = api.post(f"/v1/tenants/{tenant}/write-keys", headers=admin)
    assert created.status_code == 201, created.text
    key, key_id = created.json()["key"], created.json()["key_id"]
    assert key.startswith(f"mlk_{key_id}_")
    listed = api.get(f"/v1/tenants/{tenant}/write-keys", headers=auth_headers(api, tenant=tenant, role="read-only"))
    assert [k["key_id"] for k in listed.json()["items"]] == [key_id]
    assert key.split("_", 2)[2] not in listed.text  # ids and dates only
    # Another tenant's admin neither sees nor revokes the key (404, as for any object of another tenant).
    other = tenant_admin(api, "it-other-" + tenant[-8:])
    assert api.get(f"/v1/tenants/{tenant}/write-keys", headers=other).status_code == 404
    assert api.delete(f"/v1/tenants/{tenant}/write-keys/{key_id}", headers=other).status_code == 404
    wrong = key[:-4] + ("aaaa" if not key.endswith("aaaa") else "bbbb")
    assert (
        worker.post("/v1/events", json=_event(tenant, 1), headers={"Authorization": f"Bearer {wrong}"}).status_code
        == 401
    )
    assert api.delete(f"/v1/tenants/{tenant}/write-keys/{key_id}", headers=admin).status_code == 204
    assert api.get(f"/v1/tenants/{tenant}/write-keys", headers=admin).json() == {"items": []}
    assert api.delete(f"/v1/tenants/{tenant}/write-keys/ffff", headers=admin).status_code == 404
    revoked = worker.post("/v1/events", json=_event(tenant, 1), headers={"Authorization": f"Bearer {key}"})
    assert revoked.status_code == 401
    assert revoked.headers["content-type"] == "application/problem+json"
    rows = read(tenant_audit_path(api.app.state.ctx, tenant), AuditQuery(action="write_key.", limit=10))  # type: ignore[attr-defined]
    assert sorted(r.action for r in rows) == ["write_key.create", "write_key.revoke"]


def test_an_access_token_with_events_write_sends_events_of_its_tenant(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str
) -> None:
    # A token of the admin API's authorization server (same control plane: the worker reads its public keys there).
    writer = auth_headers(api, tenant=tenant, role="read-write")  # tenant:read sql:read events:write
    marks = mark(settings, PRIORITY_TOPIC)
    response = worker.post("/v1/events", json=[_event(tenant, 1), _event("someone-else", 2)], headers=writer)
    assert response.status_code == 200, response.text
    assert [r["status"] for r in response.json()["results"]] == ["accepted", "rejected"]
    assert response.json()["results"][1]["error"]["field"] == "tenantid"  # the token decides the tenant
    [record] = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=1)
    assert record.headers["ce_id"] == b"ingest-1"


def test_an_access_token_without_events_write_is_403_and_a_platform_token_needs_a_tenant(
    worker: TestClient, api: TestClient, tenant: str
) -> None:
    reader = auth_headers(api, tenant=tenant, role="read-only")  # tenant:read sql:read
    refused = worker.post("/v1/events", json=_event(tenant, 1), headers=reader)
    assert refused.status_code == 403, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert refused.json()["type"] == "/problems/insufficient-scope"
    assert refused.json()["required_scopes"] == ["events:write"]
    # Scopes can be narrowed at the token endpoint: an admin client asking for tenant:read only cannot write.
    narrowed = auth_headers(api, tenant=tenant, role="admin", scope="tenant:read")
    assert worker.post("/v1/events", json=_event(tenant, 1), headers=narrowed).status_code == 403
    platform = auth_headers(api, platform_admin=True)
    no_tenant = worker.post("/v1/events", json=_event(tenant, 1), headers=platform)
    assert no_tenant.status_code == 403 and no_tenant.json()["type"] == "/problems/tenant-required"


def test_a_forged_expired_or_revoked_token_is_401(worker: TestClient, api: TestClient, tenant: str) -> None:
    writer = auth_headers(api, tenant=tenant, role="read-write")
    token = writer["Authorization"].removeprefix("Bearer ")
    header, payload, signature = token.split(".")
    forged = f"{header}.{payload}.{signature[:-4]}{'AAAA' if not signature.endswith('AAAA') else 'BBBB'}"
    bad = worker.post("/v1/events", json=_event(tenant, 1), headers={"Authorization": f"Bearer {forged}"})
    assert bad.status_code == 401 and bad.json()["type"] == "/problems/invalid-token"
    assert 'error="invalid_token"' in bad.headers["www-authenticate"]
    # Revoking the client through the admin API refuses its tokens (within the client cache's TTL).
    client_id = _client_id(token)
    revoke = api.delete(f"/v1/tenants/{tenant}/clients/{client_id}", headers=tenant_admin(api, tenant))
    assert revoke.status_code == 200, revoke.text
    wait_for(
        "the revoked client's token refused",
        lambda: worker.post("/v1/events", json=_event(tenant, 1), headers=writer).status_code == 401 or None,
        timeout_s=15,
    )


def _client_id(token: str) -> str:
    payload = token.split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    client_id: str = claims["client_id"]
    return client_id


def test_removing_a_pii_tag_needs_the_pii_grant_and_is_audited(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str
) -> None:
    # Issue 12, item 1: any write key or events:write token could take a PII tag off; the column then read in clear.
    urn = asset_urn("trino", "metalake", "lake", trino_schema(settings, tenant), "people", "email")

    def removal(i: int) -> dict[str, Any]:
        return {
            "specversion": "1.0",
            "id": f"pii-{i}",
            "source": "/producers/it",
            "type": "io.metalake.classification.removed.v1",
            "tenantid": tenant,
            "data": {"urn": urn, "version": i, "tag": "PII"},
        }

    admin = tenant_admin(api, tenant)
    plain = _write_key(api, tenant)
    granted = api.post(f"/v1/tenants/{tenant}/write-keys", json={"pii": True}, headers=admin)
    assert granted.status_code == 201 and granted.json()["pii"] is True, granted.text
    listed = {k["key_id"]: k["pii"] for k in api.get(f"/v1/tenants/{tenant}/write-keys", headers=admin).json()["items"]}
    assert listed == {plain.split("_")[1]: False, granted.json()["key_id"]: True}
    marks = mark(settings, PRIORITY_TOPIC)
    refused = worker.post("/v1/events", json=[removal(1)], headers={"Authorization": f"Bearer {plain}"})
    assert refused.status_code == 403, refused.text
    assert refused.headers["content-type"] == "application/problem+json"
    assert (refused.json()["type"], refused.json()["field"]) == ("/problems/pii-grant-required", "data/tag")
    writer = auth_headers(api, tenant=tenant, role="read-write")  # events:write, no pii:read
    assert worker.post("/v1/events", json=[removal(2)], headers=writer).status_code == 403
    accepted = worker.post(
        "/v1/events", json=[removal(3)], headers={"Authorization": f"Bearer {granted.json()['key']}"}
    )
    assert accepted.status_code == 200 and accepted.json()["accepted"] == 1, accepted.text
    # A tenant administrator's token holds the grant.
    assert worker.post("/v1/events", json=[removal(4)], headers=admin).json()["accepted"] == 1
    # Only the granted removals reached Kafka.
    records = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=2)
    assert sorted(r.headers["ce_id"] for r in records) == [b"pii-3", b"pii-4"]
    rows = read(
        tenant_audit_path(api.app.state.ctx, tenant),  # type: ignore[attr-defined]
        AuditQuery(action="asset.tag.remove", limit=10),
    )
    actors = sorted((r.actor.startswith("write-key:"), r.result) for r in rows)
    assert actors == [(False, "accepted"), (False, "refused"), (True, "accepted"), (True, "refused")]
    assert all(r.counts == {"pii": 1} for r in rows)


def test_deleting_an_asset_a_pii_tag_propagated_to_needs_the_pii_grant(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    # Propagation withdraws tags from a deleted asset: deleting the copy of a PII column through the ingest API
    # unmasked it. The worker reads the tenant's live propagated tags (FerretDB) to tell.
    origin, copy = (
        asset_urn("trino", "metalake", "lake", trino_schema(settings, tenant), t, "email") for t in ("a", "b")
    )
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    db["propagated_tags"].insert_one(
        {
            "_id": f"{copy}|PII|{origin}",
            "urn": copy,
            "tag": "PII",
            "origin": origin,
            "path": [origin, copy],
            "depth": 1,
            "deleted": False,
            "version": 1,
            "event_id": "e1",
        }
    )
    try:

        def deleted(i: int, urn: str) -> dict[str, Any]:
            return {
                "specversion": "1.0",
                "id": f"del-{i}",
                "source": "/producers/it",
                "type": "io.metalake.asset.deleted.v1",
                "tenantid": tenant,
                "data": {"urn": urn, "version": i},
            }

        plain = {"Authorization": f"Bearer {_write_key(api, tenant)}"}
        refused = worker.post("/v1/events", json=[deleted(1, copy)], headers=plain)
        assert refused.status_code == 403, refused.text
        assert (refused.json()["type"], refused.json()["field"]) == ("/problems/pii-grant-required", "data/urn")
        # The origin's deletion keeps what it propagated: no grant needed.
        assert worker.post("/v1/events", json=[deleted(2, origin)], headers=plain).json()["accepted"] == 1
        admin = tenant_admin(api, tenant)
        assert worker.post("/v1/events", json=[deleted(3, copy)], headers=admin).json()["accepted"] == 1
    finally:
        mongo.drop_database(db.name)


def test_a_suspended_or_deleting_tenants_write_key_is_refused_403(
    worker: TestClient, api: TestClient, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    key = _write_key(api, tenant)
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    # The worker's cached tenant lookup (the gate's): forgotten here instead of waiting api.client_cache_ttl_s.
    directory = worker.app.state.runtime.gate.tenants  # type: ignore[attr-defined]
    try:
        for state, status in (
            (TenantState.ACTIVE, 200),
            (TenantState.SUSPENDED, 403),
            (TenantState.DELETING, 403),
            (TenantState.ACTIVE, 200),
        ):
            registry.set_state(tenant, state)
            directory.invalidate(tenant)
            for headers in ({"Authorization": f"Bearer {key}"}, {"X-Metalake-Write-Key": key}):
                response = worker.post("/v1/events", json=_event(tenant, 1), headers=headers)
                assert response.status_code == status, (state, response.text)
                if status == 403:
                    assert response.headers["content-type"] == "application/problem+json"
                    assert response.json()["type"].endswith("/tenant-suspended")
                    assert response.json()["field"] == "tenant" and key not in response.text
    finally:
        registry.delete(tenant)
        directory.invalidate(tenant)
