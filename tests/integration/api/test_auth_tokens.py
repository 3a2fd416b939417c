"""The built-in authorization server end to end: client credentials in, RFC 9068 tokens out, and what the resource
server then accepts. Real FerretDB control plane, real signing keys, the app through TestClient."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from joserfc.jwk import KeySet
from pymongo import MongoClient

from api.app import create_app
from control.auth.clients import ClientStore, Role
from ops.settings import Settings
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry, TenantState
from tests._support.tokens import api_settings, auth_headers, create_api_client, request_token

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]


@pytest.fixture
def client(settings: Settings, mongo: Mongo) -> Iterator[TestClient]:
    # The issuer pinned, so the claims below do not depend on the environment.
    app = create_app(api_settings(settings, client_cache_ttl_s=0.0, issuer="http://127.0.0.1:8000"), mongo=mongo)
    with TestClient(app) as c:
        yield c


def _segments(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    head, body, _ = token.split(".")
    pad = lambda s: s + "=" * (-len(s) % 4)  # noqa: E731
    return json.loads(base64.urlsafe_b64decode(pad(head))), json.loads(base64.urlsafe_b64decode(pad(body)))


def test_client_credentials_basic_and_post_give_rfc9068_tokens(client: TestClient, tenant: str) -> None:
    record, secret = create_api_client(client, tenant=tenant, role="read-only")
    for method in ("basic", "post"):
        answer = request_token(client, record.client_id, secret, method=method)
        assert answer["token_type"] == "Bearer"
        assert answer["expires_in"] == 900
        assert answer["scope"] == "tenant:read sql:read"
        header, claims = _segments(answer["access_token"])
        assert header["typ"] == "at+jwt" and header["alg"] == "RS256" and header["kid"]
        now = time.time()
        assert claims["iss"] == "http://127.0.0.1:8000"
        assert claims["aud"] == "metalake-api"
        assert claims["sub"] == claims["client_id"] == record.client_id
        assert claims["tenant"] == tenant
        assert claims["scope"] == "tenant:read sql:read"
        assert abs(claims["iat"] - now) < 30 and abs(claims["nbf"] - now) < 30
        assert claims["exp"] == claims["iat"] + 900
        assert len(claims["jti"]) >= 16
        # The kid is in the published JWKS, and the key there verifies the token.
        jwks = client.get("/.well-known/jwks.json").json()
        assert header["kid"] in {k["kid"] for k in jwks["keys"]}
        assert all("d" not in k for k in jwks["keys"]), "a private key member leaked into the JWKS"
        KeySet.import_key_set(jwks)
    # Tokens carry unique ids.
    one = _segments(request_token(client, record.client_id, secret)["access_token"])[1]["jti"]
    two = _segments(request_token(client, record.client_id, secret)["access_token"])[1]["jti"]
    assert one != two


def test_metadata_document(client: TestClient) -> None:
    meta = client.get("/.well-known/oauth-authorization-server").json()
    assert meta["issuer"] == "http://127.0.0.1:8000"
    assert meta["token_endpoint"] == "http://127.0.0.1:8000/oauth/token"
    assert meta["jwks_uri"] == "http://127.0.0.1:8000/.well-known/jwks.json"
    assert meta["grant_types_supported"] == ["client_credentials"]
    assert set(meta["token_endpoint_auth_methods_supported"]) == {"client_secret_basic", "client_secret_post"}
    assert "platform:admin" in meta["scopes_supported"]


def test_token_endpoint_errors(client: TestClient, tenant: str) -> None:
    record, secret = create_api_client(client, tenant=tenant, role="read-only")
    cases: list[tuple[dict[str, Any], int, str]] = [
        ({"data": {"grant_type": "client_credentials"}, "auth": (record.client_id, "wrong")}, 401, "invalid_client"),
        ({"data": {"grant_type": "client_credentials"}, "auth": ("mlc_nobody", secret)}, 401, "invalid_client"),
        ({"data": {"grant_type": "client_credentials"}}, 401, "invalid_client"),
        ({"data": {"grant_type": "password"}, "auth": (record.client_id, secret)}, 400, "unsupported_grant_type"),
        (
            {"data": {"grant_type": "client_credentials", "scope": "tenant:admin"}, "auth": (record.client_id, secret)},
            400,
            "invalid_scope",
        ),
        (
            {"data": {"grant_type": "client_credentials", "scope": "made:up"}, "auth": (record.client_id, secret)},
            400,
            "invalid_scope",
        ),
    ]
    for kwargs, status, error in cases:
        response = client.post("/oauth/token", **kwargs)
        assert response.status_code == status, (kwargs.get("data"), response.text)
        assert response.headers["content-type"] == "application/problem+json"
        body = response.json()
        assert body["error"] == error and body["status"] == status
        assert secret not in response.text
    # Unknown client and wrong secret are indistinguishable.
    wrong = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(record.client_id, "x"))
    nobody = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=("mlc_nobody", "x"))
    assert wrong.json()["detail"] == nobody.json()["detail"]
    assert wrong.headers["www-authenticate"].startswith("Basic")
    # Not a form: 415 problem.
    response = client.post("/oauth/token", json={"grant_type": "client_credentials"}, auth=(record.client_id, secret))
    assert response.status_code == 415
    # A narrower scope than the role is granted as asked.
    assert request_token(client, record.client_id, secret, scope="sql:read")["scope"] == "sql:read"


def test_token_works_on_its_tenant_and_scope_is_enforced(client: TestClient, tenant: str) -> None:
    admin = auth_headers(client, tenant=tenant, role="admin")
    assert client.get(f"/v1/tenants/{tenant}/clients", headers=admin).status_code == 200
    reader = auth_headers(client, tenant=tenant, role="read-only")
    response = client.get(f"/v1/tenants/{tenant}/clients", headers=reader)
    assert response.status_code == 403
    assert response.headers["content-type"] == "application/problem+json"
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
    assert response.json()["required_scopes"] == ["tenant:admin"]
    # An admin client that asked only for tenant:read holds only that.
    narrowed = auth_headers(client, tenant=tenant, role="admin", scope="tenant:read")
    assert client.get(f"/v1/tenants/{tenant}/clients", headers=narrowed).status_code == 403
    # Another tenant: 404, the same answer as a tenant that does not exist.
    other = client.get("/v1/tenants/it-someone-else/clients", headers=admin)
    assert other.status_code == 404 and other.json()["type"] == "/problems/tenant-not-found"
    # A platform admin reaches every tenant.
    platform = auth_headers(client, platform_admin=True)
    assert client.get(f"/v1/tenants/{tenant}/clients", headers=platform).status_code == 200


def test_client_lifecycle_rotate_with_overlap_and_revoke(client: TestClient, tenant: str) -> None:
    admin = auth_headers(client, tenant=tenant, role="admin")
    created = client.post(f"/v1/tenants/{tenant}/clients", json={"name": "dash", "role": "read-only"}, headers=admin)
    assert created.status_code == 201, created.text
    body = created.json()
    client_id, first = body["client_id"], body["client_secret"]
    assert body["scopes"] == ["tenant:read", "sql:read"] and body["tenant"] == tenant
    # The secret is never shown again, nor stored in the clear.
    got = client.get(f"/v1/tenants/{tenant}/clients/{client_id}", headers=admin)
    assert got.status_code == 200 and "client_secret" not in got.json() and first not in got.text
    listed = client.get(f"/v1/tenants/{tenant}/clients", headers=admin).json()
    assert client_id in {c["client_id"] for c in listed["items"]} and first not in json.dumps(listed)
    stored = client.app.state.ctx.mongo[CONTROL_DATABASE]["clients"].find_one({"_id": client_id})  # type: ignore[attr-defined]
    assert first not in json.dumps(stored, default=str)

    # Rotation with an overlap: both secrets work until the old one's window ends.
    rotated = client.post(
        f"/v1/tenants/{tenant}/clients/{client_id}/rotate", json={"overlap_seconds": 3600}, headers=admin
    )
    assert rotated.status_code == 200, rotated.text
    second = rotated.json()["client_secret"]
    assert second != first and rotated.json()["secrets_valid"] == 2
    assert rotated.json()["previous_secret_expires_at"] is not None
    request_token(client, client_id, first)
    request_token(client, client_id, second)
    # Rotation without overlap revokes the previous secrets at once; only two are ever valid.
    third = client.post(
        f"/v1/tenants/{tenant}/clients/{client_id}/rotate", json={"overlap_seconds": 0}, headers=admin
    ).json()["client_secret"]
    for old in (first, second):
        denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, old))
        assert denied.status_code == 401
    token = request_token(client, client_id, third)["access_token"]
    reader = {"Authorization": f"Bearer {token}"}
    assert client.get(f"/v1/tenants/{tenant}/clients", headers=reader).status_code == 403  # valid, but read-only

    # Revocation: no new tokens, and the tokens it holds are refused.
    revoked = client.delete(f"/v1/tenants/{tenant}/clients/{client_id}", headers=admin)
    assert revoked.status_code == 200 and revoked.json()["state"] == "revoked"
    denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, third))
    assert denied.status_code == 401
    refused = client.get(f"/v1/tenants/{tenant}/clients", headers=reader)
    assert refused.status_code == 401 and "revoked" in refused.json()["detail"]
    assert client.post(f"/v1/tenants/{tenant}/clients/{client_id}/rotate", headers=admin).status_code == 409

    # Each change is in the tenant's audit trail: who (the admin client), what, the result; never the secret.
    trail = client.get(f"/v1/tenants/{tenant}/audit", params={"target": client_id}, headers=admin)
    assert trail.status_code == 200, trail.text
    actions = sorted(row["action"] for row in trail.json()["items"])
    assert actions == ["client.create", "client.revoke", "client.rotate", "client.rotate"]
    assert {row["result"] for row in trail.json()["items"]} == {"done"}
    assert all(third not in json.dumps(row) for row in trail.json()["items"])


def test_client_routes_reject_bad_input_and_foreign_clients(client: TestClient, tenant: str) -> None:
    admin = auth_headers(client, tenant=tenant, role="admin")
    bad = client.post(f"/v1/tenants/{tenant}/clients", json={"name": "x", "role": "platform-admin"}, headers=admin)
    assert bad.status_code == 422 and bad.json()["field"] == "role"
    bad = client.post(f"/v1/tenants/{tenant}/clients", json={"name": "", "role": "admin"}, headers=admin)
    assert bad.status_code == 422 and bad.json()["field"] == "name"
    # Another tenant's client id inside my tenant's URL: 404, as if it did not exist.
    foreign, _ = create_api_client(client, tenant=f"{tenant}-b", role="admin")
    for method, suffix in (("GET", ""), ("POST", "/rotate"), ("DELETE", "")):
        response = client.request(method, f"/v1/tenants/{tenant}/clients/{foreign.client_id}{suffix}", headers=admin)
        assert response.status_code == 404, (method, suffix, response.text)
    assert client.app.state.auth.clients.get(foreign.client_id).active  # type: ignore[attr-defined]


def test_paging(client: TestClient, tenant: str) -> None:
    admin = auth_headers(client, tenant=tenant, role="admin")
    for i in range(3):
        client.post(f"/v1/tenants/{tenant}/clients", json={"name": f"c{i}", "role": "read-only"}, headers=admin)
    seen: list[str] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": 2, **({"cursor": cursor} if cursor else {})}
        page = client.get(f"/v1/tenants/{tenant}/clients", params=params, headers=admin).json()
        seen += [c["client_id"] for c in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert len(seen) == len(set(seen)) == 4  # three made here, plus the admin client


def test_suspended_tenant_gets_no_tokens_and_its_tokens_are_refused(
    settings: Settings, mongo: Mongo, client: TestClient, tenant: str
) -> None:
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    registry.set_state(tenant, TenantState.ACTIVE)
    try:
        record, secret = create_api_client(client, tenant=tenant, role="admin")
        token = request_token(client, record.client_id, secret)["access_token"]
        headers = {"Authorization": f"Bearer {token}"}
        assert client.get(f"/v1/tenants/{tenant}/clients", headers=headers).status_code == 200
        registry.set_state(tenant, TenantState.SUSPENDED)
        client.app.state.auth.tenants.invalidate(tenant)  # type: ignore[attr-defined]
        refused = client.get(f"/v1/tenants/{tenant}/clients", headers=headers)
        assert refused.status_code == 403 and refused.json()["type"] == "/problems/tenant-suspended"
        denied = client.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(record.client_id, secret))
        assert denied.status_code == 401
        # A platform admin still reaches the suspended tenant (to resume it).
        platform = auth_headers(client, platform_admin=True)
        assert client.get(f"/v1/tenants/{tenant}/clients", headers=platform).status_code == 200
    finally:
        registry.delete(tenant)


def test_rate_limit_per_client(settings: Settings, mongo: Mongo, tenant: str) -> None:
    limits = {"rate_limit_per_s": 0.2, "rate_limit_burst": 3, "token_failure_rate_per_s": 0.2, "token_failure_burst": 3}
    app = create_app(api_settings(settings, **limits), mongo=mongo)
    with TestClient(app) as client:
        one = auth_headers(client, tenant=tenant, role="admin")
        two = auth_headers(client, tenant=tenant, role="admin")
        url = f"/v1/tenants/{tenant}/clients"
        assert [client.get(url, headers=one).status_code for _ in range(3)] == [200, 200, 200]
        limited = client.get(url, headers=one)
        assert limited.status_code == 429
        assert limited.headers["content-type"] == "application/problem+json"
        assert 1 <= int(limited.headers["retry-after"]) <= 5
        assert limited.json()["type"] == "/problems/rate-limited"
        # Another client of the same tenant has its own budget.
        assert client.get(url, headers=two).status_code == 200
        # The token endpoint limits failures per client id and address.
        record, _ = create_api_client(client, tenant=tenant, role="read-only")
        codes = [
            client.post(
                "/oauth/token", data={"grant_type": "client_credentials"}, auth=(record.client_id, "x")
            ).status_code
            for _ in range(4)
        ]
        assert codes == [401, 401, 401, 429]


def test_health_and_readiness(settings: Settings, mongo: Mongo, client: TestClient) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready", "checks": {"mongo": "ok", "kafka": "ok"}}
    broken = settings.model_copy(deep=True)
    broken.kafka.bootstrap_servers = "127.0.0.1:1"
    with TestClient(create_app(broken, mongo=mongo)) as other:
        response = other.get("/readyz")
        assert response.status_code == 503
        assert response.headers["content-type"] == "application/problem+json"
        assert response.json()["checks"] == {"mongo": "ok", "kafka": "unreachable"}


def test_without_a_key_encryption_key_no_tokens_are_issued(settings: Settings, mongo: Mongo, tenant: str) -> None:
    bare = settings.model_copy(deep=True)
    bare.api.key_encryption_key = None
    with TestClient(create_app(bare, mongo=mongo)) as client:
        record, secret = ClientStore(mongo[CONTROL_DATABASE]).create(tenant, Role.READ_ONLY, "t")
        response = client.post(
            "/oauth/token", data={"grant_type": "client_credentials"}, auth=(record.client_id, secret)
        )
        assert response.status_code == 503
        assert response.json()["type"] == "/problems/signing-keys-unavailable"
        assert secret not in response.text
