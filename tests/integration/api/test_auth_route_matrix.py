"""Matrices over every route the app serves, so routers added later are covered without touching this file:

* every route except health, token, JWKS, metadata and share links answers 401 (problem+json, a Bearer challenge)
  without a token and with a bad one, before reading a byte of the body it was sent;
* every ``/v1/tenants/{tenant}/...`` route answers tenant A's token on tenant B with 404 or 403, never data;
* every protected operation declares the bearer/OAuth 2 security schemes and has a summary in the OpenAPI document.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.routing import iter_route_contexts
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from control.auth.clients import Role
from ops.settings import Settings
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry, TenantState
from tests._support.tokens import api_settings, auth_headers, create_api_client, request_token

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]

PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("POST", "/oauth/token"),
    ("GET", "/.well-known/jwks.json"),
    ("GET", "/.well-known/oauth-authorization-server"),
    # FastAPI's own documentation of the API.
    ("GET", "/openapi.json"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/redoc"),
}
PUBLIC_PREFIXES = ("/share/",)
# No bearer token either: the engine's key in the path authenticates (Trino's OPA client sends no header).
KEYED_PREFIXES = ("/v1/opa/",)
_PARAM = re.compile(r"\{([^}:]+)(?::[^}]+)?\}")


@pytest.fixture(scope="module")
def client(settings: Settings, mongo: Mongo) -> Iterator[TestClient]:
    # A roomy rate limit: the matrix sends hundreds of requests with a handful of tokens.
    app = create_app(
        api_settings(
            settings,
            rate_limit_per_s=1000.0,
            tenant_rate_limit_per_s=1000.0,
            tenant_rate_limit_burst=10_000,
            rate_limit_burst=10_000,
            token_peer_rate_per_s=1000.0,
            token_peer_burst=10_000,
            token_failure_rate_per_s=1000.0,
            token_failure_burst=10_000,
        ),
        mongo=mongo,
    )
    with TestClient(app) as c:
        yield c


def _operations(client: TestClient) -> list[tuple[str, str]]:
    """Every (method, path) the app routes, through included routers at any depth."""
    out = []
    for context in iter_route_contexts(client.app.routes):  # type: ignore[attr-defined]
        out += [(method, context.path) for method in sorted(context.methods or ()) if method != "HEAD"]
    return out


def _is_public(method: str, path: str) -> bool:
    return (method, path) in PUBLIC or path.startswith(PUBLIC_PREFIXES) or path.startswith(KEYED_PREFIXES)


def _fill(path: str, values: dict[str, str]) -> str:
    return _PARAM.sub(lambda m: values.get(m.group(1), "x-unknown"), path)


def _call(client: TestClient, method: str, url: str, headers: dict[str, str] | None = None) -> Any:
    kwargs: dict[str, Any] = {"headers": headers or {}}
    if method in {"POST", "PUT", "PATCH"}:
        kwargs["json"] = {}
    return client.request(method, url, **kwargs)


def _stream_body(client: TestClient, method: str, url: str, headers: dict[str, str]) -> tuple[int, int]:
    """The app called as a server would, with an endless chunked JSON body: its status and the bytes it took."""
    taken = 0

    async def receive() -> dict[str, Any]:
        nonlocal taken
        taken += 64 * 1024
        return {"type": "http.request", "body": b" " * (64 * 1024), "more_body": taken < 16 * 2**20}

    status = 0

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    raw = {"content-type": "application/json", "transfer-encoding": "chunked", **headers}
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": "http",
        "path": url,
        "raw_path": url.encode(),
        "root_path": "",
        "query_string": b"",
        "headers": [(k.lower().encode(), v.encode()) for k, v in raw.items()],
        "client": ("203.0.113.8", 40000),
        "server": ("testserver", 80),
    }
    asyncio.run(client.app(scope, receive, send))  # type: ignore[arg-type]
    return status, taken


def test_every_route_but_the_public_ones_needs_a_token(client: TestClient) -> None:
    operations = _operations(client)
    protected = [(m, p) for m, p in operations if not _is_public(m, p)]
    assert ("GET", "/v1/tenants/{tenant}/clients") in protected
    assert len(protected) >= 5
    values = {"tenant": "it-matrix"}
    failures = []
    for method, path in protected:
        url = _fill(path, values)
        for headers in ({}, {"Authorization": "Bearer not.a.token"}, {"Authorization": "Basic eDp5"}):
            response = _call(client, method, url, headers)
            ok = (
                response.status_code == 401
                and response.headers.get("content-type") == "application/problem+json"
                and response.headers.get("www-authenticate", "").startswith("Bearer")
            )
            if not ok:
                failures.append((method, path, headers.get("Authorization"), response.status_code))
    assert not failures, f"routes answering without a valid token: {failures}"
    # A body is never read before the token is checked: a 16 MiB body streamed at each protected route, anonymous or
    # with a bad token, gets the 401 with no byte of it taken.
    unread = [
        (method, path, status, taken)
        for method, path in protected
        for headers in ({}, {"Authorization": "Bearer not.a.token"})
        for status, taken in [_stream_body(client, method, _fill(path, values), headers)]
        if (status, taken) != (401, 0)
    ]
    assert not unread, f"routes reading a body before the token check: {unread}"
    # The keyed ones refuse a wrong key (401 problem) without taking a byte of the body.
    keyed = [(m, p) for m, p in operations if p.startswith(KEYED_PREFIXES)]
    assert keyed
    for method, path in keyed:
        url = _fill(path, {"key": "mle_0123456789abcdef_wrong"})
        response = _call(client, method, url)
        assert response.status_code == 401, (method, path, response.status_code)
        assert response.headers.get("content-type") == "application/problem+json"
        assert "wrong" not in response.text
        assert _stream_body(client, method, url, {}) == (401, 0), (method, path)
    # And the public ones really are public.
    for method, path in operations:
        if _is_public(method, path) and not path.startswith(KEYED_PREFIXES):
            assert _call(client, method, _fill(path, values)).status_code != 401, (method, path)


def test_cross_tenant_matrix(client: TestClient, mongo: Mongo, tenant: str) -> None:
    tenant_b = f"{tenant}-b"
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    # B is registered, so a platform listing that leaked to a tenant token would show it.
    registry.create(tenant_b, Tier.POOLED)
    registry.set_state(tenant_b, TenantState.ACTIVE)
    try:
        _cross_tenant(client, tenant, tenant_b)
    finally:
        registry.delete(tenant_b)


def _cross_tenant(client: TestClient, tenant: str, tenant_b: str) -> None:
    victim, _ = create_api_client(client, tenant=tenant_b, role="admin")
    values = {"tenant": tenant_b, "client_id": victim.client_id}
    tokens = {role: auth_headers(client, tenant=tenant, role=role) for role in ("admin", "read-write", "read-only")}
    tenant_routes = [(m, p) for m, p in _operations(client) if p.startswith("/v1/tenants/{tenant}")]
    assert ("DELETE", "/v1/tenants/{tenant}/clients/{client_id}") in tenant_routes
    failures = []
    for method, path in tenant_routes:
        url = _fill(path, values)
        for role, headers in tokens.items():
            response = _call(client, method, url, headers)
            leaked = victim.client_id in response.text and "client_id" not in path
            if response.status_code not in (403, 404) or leaked:
                failures.append((role, method, path, response.status_code))
            elif response.headers.get("content-type") != "application/problem+json":
                failures.append((role, method, path, "not problem+json"))
    # Routes outside any tenant (platform listings, plugin catalogues): a tenant token never sees B there either.
    for method, path in _operations(client):
        if method != "GET" or _is_public(method, path) or path.startswith("/v1/tenants/{tenant}") or "{" in path:
            continue
        for role, headers in tokens.items():
            response = _call(client, method, path, headers)
            if tenant_b in response.text or victim.client_id in response.text:
                failures.append((role, method, path, "shows tenant B"))
    assert not failures, f"tenant A reached tenant B: {failures}"
    # The control for the check above: the platform listing does show B to a platform administrator.
    if ("GET", "/v1/tenants") in _operations(client):
        platform = auth_headers(client, platform_admin=True)
        ids: list[str] = []
        cursor = None
        for _ in range(100):
            params = {"limit": 500, **({"cursor": cursor} if cursor else {})}
            page = client.get("/v1/tenants", params=params, headers=platform).json()
            ids += [str(item.get("id", item.get("tenant"))) for item in page["items"]]
            cursor = page.get("next_cursor")
            if not cursor:
                break
        assert tenant_b in ids
    # Nothing happened to B's objects along the way.
    record = client.app.state.auth.clients.get(victim.client_id)  # type: ignore[attr-defined]
    assert record is not None and record.active and len(record.secrets) == 1
    # The control: the same token on its own tenant is let through the tenant check.
    own = client.get(f"/v1/tenants/{tenant}/clients", headers=tokens["admin"])
    assert own.status_code == 200


def test_platform_routes_refuse_tenant_tokens(client: TestClient, tenant: str) -> None:
    """Every ``/v1/platform/...`` route (platform-admin clients, ...) answers 403 to every tenant role, even the
    tenant's admin, and changes nothing."""
    target, _ = create_api_client(client, tenant=None, role="platform-admin")
    platform_routes = [(m, p) for m, p in _operations(client) if p.startswith("/v1/platform/")]
    assert ("DELETE", "/v1/platform/clients/{client_id}") in platform_routes
    assert ("POST", "/v1/platform/clients/{client_id}/rotate") in platform_routes
    failures = []
    try:
        for role in ("admin", "read-write", "read-only"):
            headers = auth_headers(client, tenant=tenant, role=role)
            for method, path in platform_routes:
                response = _call(client, method, _fill(path, {"client_id": target.client_id}), headers)
                if response.status_code != 403 or response.headers.get("content-type") != "application/problem+json":
                    failures.append((role, method, path, response.status_code))
        record = client.app.state.auth.clients.get(target.client_id)  # type: ignore[attr-defined]
        assert record is not None and record.active and len(record.secrets) == 1
    finally:
        client.app.state.auth.clients.revoke(target.client_id)  # type: ignore[attr-defined]
    assert not failures, f"tenant tokens reached platform routes: {failures}"


def test_openapi_declares_security_and_summaries(client: TestClient) -> None:
    schema = client.get("/openapi.json").json()
    assert set(schema["components"]["securitySchemes"]) >= {"bearer", "oauth2"}
    flows = schema["components"]["securitySchemes"]["oauth2"]["flows"]
    assert flows["clientCredentials"]["tokenUrl"] == "/oauth/token"
    missing_security, missing_summary = [], []
    for path, operations in schema["paths"].items():
        for method, operation in operations.items():
            if not operation.get("summary"):
                missing_summary.append((method, path))
            if _is_public(method.upper(), path):
                assert operation.get("security") == [], (method, path)
                continue
            names = {name for requirement in operation.get("security", []) for name in requirement}
            if not {"bearer", "oauth2"} <= names:
                missing_security.append((method, path))
            for status in ("401", "403", "429"):
                assert status in operation["responses"], (method, path, status)
    assert not missing_security, f"protected operations without the token schemes: {missing_security}"
    assert not missing_summary, f"operations without a summary: {missing_summary}"


# Every route that can take a PII tag off an asset or stop it spreading (issue 12, item 1), with a request doing so.
# A route added later under /assets/tags must be listed here, so its PII check is not forgotten.
PII_WEAKENING = {
    ("DELETE", "/v1/tenants/{tenant}/assets/tags"): {
        "params": {"urn": "urn:metalake:trino:metalake/x/y/z", "tag": "PII"}
    },
    ("POST", "/v1/tenants/{tenant}/assets/tags"): {
        "json": {"urn": "urn:metalake:trino:metalake/x/y/z", "tag": "GDPR.personal", "propagate": False}
    },
}


def test_pii_weakening_matrix(client: TestClient, mongo: Mongo, tenant: str) -> None:
    tag_routes = {(m, p) for m, p in _operations(client) if "/tags" in p and m in {"POST", "PUT", "PATCH", "DELETE"}}
    assert tag_routes == set(PII_WEAKENING), "a route changing tags must be in PII_WEAKENING"
    writer = auth_headers(client, tenant=tenant, role="read-write")
    record, secret = client.app.state.auth.clients.create(tenant, Role.READ_WRITE, "pii-writer", pii=True)  # type: ignore[attr-defined]
    granted = {"Authorization": f"Bearer {request_token(client, record.client_id, secret)['access_token']}"}
    for (method, path), request in PII_WEAKENING.items():
        url = _fill(path, {"tenant": tenant})
        refused = client.request(method, url, headers=writer, **request)
        assert refused.status_code == 403, (method, path, refused.text)
        assert refused.json()["type"].endswith("pii-grant-required"), (method, path)
        # With the grant, the PII check lets it through to the asset lookup (no such asset here).
        allowed = client.request(method, url, headers=granted, **request)
        assert allowed.status_code == 404, (method, path, allowed.text)
