"""Platform-admin clients through the API (``/v1/platform/clients``): listed, rotated, revoked, audited in the
platform audit; a revoked admin's tokens are refused at once; the last active admin is kept unless forced."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from api.context import ApiContext
from api.services import audit, platform_clients
from control.audit import AuditQuery, read
from control.auth.clients import ClientStore, Role
from control.auth.principal import Principal, Scope
from ops.settings import Settings
from tenants.naming import platform_audit_dir
from tests._support.tokens import api_settings, auth_headers, create_api_client, request_token

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]


@pytest.fixture
def client(settings: Settings, mongo: Mongo) -> Iterator[TestClient]:
    # The default client cache TTL: the revocation must invalidate it, not wait for it.
    with TestClient(create_app(api_settings(settings), mongo=mongo)) as c:
        yield c


def _listed(client: TestClient, headers: dict[str, str]) -> tuple[dict[str, dict[str, Any]], str]:
    """Every platform-admin client the API lists (the shared database holds many), and the raw pages."""
    found: dict[str, dict[str, Any]] = {}
    raw = ""
    cursor: str | None = None
    for _ in range(1000):
        params: dict[str, Any] = {"limit": 500, **({"cursor": cursor} if cursor else {})}
        response = client.get("/v1/platform/clients", params=params, headers=headers)
        assert response.status_code == 200, response.text
        raw += response.text
        found.update({item["client_id"]: item for item in response.json()["items"]})
        cursor = response.json()["next_cursor"]
        if cursor is None:
            break
    return found, raw


def test_platform_admin_list_rotate_revoke_audited(client: TestClient, tenant: str) -> None:
    operator = auth_headers(client, platform_admin=True)
    target, first = create_api_client(client, tenant=None, role="platform-admin")
    token = request_token(client, target.client_id, first)["access_token"]
    bearer = {"Authorization": f"Bearer {token}"}
    assert client.get("/v1/tenants", headers=bearer).status_code == 200
    tenant_client, _ = create_api_client(client, tenant=tenant, role="admin")

    listed, raw = _listed(client, operator)
    assert listed[target.client_id]["state"] == "active" and listed[target.client_id]["tenant"] is None
    assert listed[target.client_id]["scopes"] == ["platform:admin"]
    assert tenant_client.client_id not in listed and first not in raw and "client_secret" not in raw
    got = client.get(f"/v1/platform/clients/{target.client_id}", headers=operator)
    assert got.status_code == 200 and got.json()["client_id"] == target.client_id
    # A tenant's client is not a platform admin: these routes neither show nor change it.
    for method, url in (
        ("GET", f"/v1/platform/clients/{tenant_client.client_id}"),
        ("POST", f"/v1/platform/clients/{tenant_client.client_id}/rotate"),
        ("DELETE", f"/v1/platform/clients/{tenant_client.client_id}"),
    ):
        answer = client.request(method, url, headers=operator)
        assert answer.status_code == 404 and answer.json()["field"] == "client_id", (method, answer.text)
    stored = client.app.state.auth.clients.get(tenant_client.client_id)  # type: ignore[attr-defined]
    assert stored is not None and stored.active and len(stored.secrets) == 1

    # Rotation: the new secret is shown once; without overlap the old one stops at once.
    rotated = client.post(
        f"/v1/platform/clients/{target.client_id}/rotate", json={"overlap_seconds": 0}, headers=operator
    )
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()["client_secret"]
    assert second != first and rotated.json()["secrets_valid"] == 1
    denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(target.client_id, first))
    assert denied.status_code == 401
    request_token(client, target.client_id, second)

    # Revocation: no new tokens, and the token it holds is refused by the gate now, not after the cache TTL.
    revoked = client.delete(f"/v1/platform/clients/{target.client_id}", headers=operator)
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    refused = client.get("/v1/tenants", headers=bearer)
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(target.client_id, second))
    assert denied.status_code == 401
    again = client.post(f"/v1/platform/clients/{target.client_id}/rotate", headers=operator)
    assert again.status_code == 409

    trail = client.get("/v1/audit", params={"target": target.client_id}, headers=operator)
    assert trail.status_code == 200, trail.text
    rows = trail.json()["items"]
    assert sorted((r["action"], r["result"]) for r in rows) == [("client.revoke", "done"), ("client.rotate", "done")]
    assert all(second not in json.dumps(r) for r in rows)


def test_platform_client_routes_refuse_tenant_tokens(client: TestClient, tenant: str) -> None:
    target, _ = create_api_client(client, tenant=None, role="platform-admin")
    try:
        for role in ("admin", "read-write", "read-only"):
            headers = auth_headers(client, tenant=tenant, role=role)
            for method, url in (
                ("GET", "/v1/platform/clients"),
                ("GET", f"/v1/platform/clients/{target.client_id}"),
                ("POST", f"/v1/platform/clients/{target.client_id}/rotate"),
                ("DELETE", f"/v1/platform/clients/{target.client_id}"),
            ):
                answer = client.request(method, url, headers=headers)
                assert answer.status_code == 403, (role, method, url, answer.status_code)
                assert answer.headers["content-type"] == "application/problem+json"
                assert "secrets_valid" not in answer.text and "client_secret" not in answer.text
        record = client.app.state.auth.clients.get(target.client_id)  # type: ignore[attr-defined]
        assert record is not None and record.active and len(record.secrets) == 1
    finally:
        client.app.state.auth.clients.revoke(target.client_id)  # type: ignore[attr-defined]


def test_the_last_active_platform_admin_is_revoked_only_when_forced(settings: Settings, mongo: Mongo) -> None:
    # A database of its own: the shared control plane always holds other tests' platform admins.
    database = f"it_admins_{secrets.token_hex(4)}"
    store = ClientStore(mongo[database])
    ctx = ApiContext(settings, mongo)
    operator = Principal(subject="mlc_operator", tenant=None, scopes=frozenset({Scope.PLATFORM_ADMIN.value}))
    try:
        first, _ = store.create(None, Role.PLATFORM_ADMIN, "first")
        second, _ = store.create(None, Role.PLATFORM_ADMIN, "second")
        revoked = platform_clients.revoke_admin(ctx, store, operator, first.client_id, force=False)
        assert revoked is not None and revoked.state == "revoked"
        with pytest.raises(platform_clients.LastPlatformAdmin):
            platform_clients.revoke_admin(ctx, store, operator, second.client_id, force=False)
        kept = store.get(second.client_id)
        assert kept is not None and kept.active
        forced = platform_clients.revoke_admin(ctx, store, operator, second.client_id, force=True)
        assert forced is not None and forced.state == "revoked"
        rows = read(platform_audit_dir(settings.lake_root), AuditQuery(target_hash=audit.target_hash(second.client_id)))
        assert sorted((r.action, r.result, r.actor) for r in rows) == [
            ("client.revoke", "done", "mlc_operator"),
            ("client.revoke", "refused", "mlc_operator"),
        ]
    finally:
        mongo.drop_database(database)


def test_the_api_refuses_to_revoke_the_last_admin_without_force(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Through HTTP the shared database always has other admins; the refusal's problem document is checked here
    # with a store that sees none besides the target.
    operator = auth_headers(client, platform_admin=True)
    target, _ = create_api_client(client, tenant=None, role="platform-admin")
    store = client.app.state.auth.clients  # type: ignore[attr-defined]
    monkeypatch.setattr(store, "other_active_platform_admins", lambda client_id: 0)
    try:
        refused = client.delete(f"/v1/platform/clients/{target.client_id}", headers=operator)
        assert refused.status_code == 409 and refused.json()["type"].endswith("/last-admin")
        assert refused.json()["field"] == "client_id"
        record = store.get(target.client_id)
        assert record is not None and record.active
        forced = client.delete(f"/v1/platform/clients/{target.client_id}", params={"force": "true"}, headers=operator)
        assert forced.status_code == 200 and forced.json()["state"] == "revoked"
    finally:
        store.revoke(target.client_id)
