"""Who may send events: an OAuth access token with events:write of the events' tenant, as well as a write key.

The tokens are real RFC 9068 JWTs of a fake issuer (``runtime_fakes.access_token``), admitted by the real gate the
admin API uses; only the client store and the tenant registry are fakes.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.ingest.auth import token_principal
from metalake.http.problems import MEDIA_TYPE, Problem
from metalake.urn import asset_urn
from tests._support.runtime_fakes import WRITE_KEY, World, access_token

URN = asset_urn("pg", "prod", "shop", "public", "orders")
WRITES = "tenant:read events:write"


def _event(i: int = 0, tenant: str = "acme") -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"ev-{i}",
        "source": "/producers/test",
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": tenant,
        "data": {"urn": URN, "version": i, "kind": "table", "name": "orders"},
    }


def _bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_a_token_with_events_write_sends_events_of_its_tenant(client: TestClient, world: World) -> None:
    response = client.post("/v1/events", json=[_event(1)], headers=_bearer(access_token(scope=WRITES)))
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 1
    assert [(r.event.id, r.event.tenantid) for r in world.publisher.routed] == [("ev-1", "acme")]


def test_a_write_key_keeps_working_beside_tokens(client: TestClient, world: World) -> None:
    for headers in (_bearer(WRITE_KEY), {"X-Metalake-Write-Key": WRITE_KEY}):
        assert client.post("/v1/events", json=_event(1), headers=headers).json()["accepted"] == 1
    assert len(world.publisher.routed) == 2


def test_the_token_decides_the_tenant_and_another_tenants_events_are_rejected(client: TestClient, world: World) -> None:
    token = access_token(scope=WRITES, tenant="globex")
    response = client.post("/v1/events", json=[_event(1, "acme"), _event(2, "globex")], headers=_bearer(token))
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["rejected", "accepted"]
    assert results[0]["error"]["field"] == "tenantid"
    assert [r.event.tenantid for r in world.publisher.routed] == ["globex"]


def test_a_token_without_events_write_is_403(client: TestClient, world: World) -> None:
    response = client.post("/v1/events", json=_event(1), headers=_bearer(access_token(scope="tenant:read sql:read")))
    assert response.status_code == 403
    assert response.headers["content-type"] == MEDIA_TYPE
    assert response.json()["type"] == "/problems/insufficient-scope"
    assert response.json()["required_scopes"] == ["events:write"]
    assert 'error="insufficient_scope"' in response.headers["www-authenticate"]
    assert world.publisher.routed == []


@pytest.mark.parametrize(
    ("overrides", "reason"),
    [
        ({"exp": 1_000_000, "iat": 999_000, "nbf": 999_000}, "token expired"),
        ({"aud": "another-api"}, "invalid claim aud"),
        ({"iss": "https://elsewhere.test"}, "invalid claim iss"),
    ],
)
def test_an_expired_or_foreign_token_is_401(
    client: TestClient, world: World, overrides: dict[str, Any], reason: str
) -> None:
    response = client.post("/v1/events", json=_event(1), headers=_bearer(access_token(scope=WRITES, **overrides)))
    assert response.status_code == 401
    assert response.json()["type"] == "/problems/invalid-token"
    assert response.json()["detail"] == reason
    assert 'error="invalid_token"' in response.headers["www-authenticate"]
    assert world.publisher.routed == []


def test_a_token_of_a_revoked_client_is_401(client: TestClient, world: World) -> None:
    world.clients.revoked.add("mlc_test")  # the client_id of jwt_forge's claims
    response = client.post("/v1/events", json=_event(1), headers=_bearer(access_token(scope=WRITES)))
    assert response.status_code == 401 and response.json()["detail"] == "the client was revoked"


def test_a_token_of_a_suspended_tenant_is_403(client: TestClient, world: World) -> None:
    world.tenants.suspend("acme")
    response = client.post("/v1/events", json=_event(1), headers=_bearer(access_token(scope=WRITES)))
    assert response.status_code == 403 and response.json()["type"] == "/problems/tenant-suspended"
    assert world.publisher.routed == []


def test_a_write_key_of_a_suspended_tenant_is_403_as_a_token_is(client: TestClient, world: World) -> None:
    world.tenants.suspend("acme")
    for headers in (_bearer(WRITE_KEY), {"X-Metalake-Write-Key": WRITE_KEY}):
        response = client.post("/v1/events", json=_event(1), headers=headers)
        assert response.status_code == 403 and response.json()["type"] == "/problems/tenant-suspended"
        assert response.json()["field"] == "tenant" and WRITE_KEY not in response.text
    assert world.publisher.routed == []


def test_a_platform_token_bound_to_no_tenant_is_refused(world: World) -> None:
    token = access_token(scope="platform:admin", tenant=None)
    with pytest.raises(Problem) as refused:
        token_principal(world.runtime.gate, token)
    assert refused.value.status == 403 and refused.value.slug == "tenant-required"


def test_a_platform_token_with_a_tenant_claim_sends_for_that_tenant(world: World) -> None:
    # platform:admin holds every scope; the tenant claim still decides which tenant's events it may send.
    token = access_token(scope="platform:admin")
    assert token_principal(world.runtime.gate, token).tenant == "acme"


@pytest.mark.parametrize(
    "value",
    ["mlk_k1_supersecretvalue", "mlk_k1_with.two.dots", "not-a-key", "a.b"],
)
def test_what_is_not_shaped_like_a_jwt_is_checked_as_a_write_key(client: TestClient, value: str) -> None:
    response = client.post("/v1/events", json=_event(1), headers=_bearer(value))
    if value == WRITE_KEY:
        assert response.status_code == 200
    else:
        assert response.status_code == 401 and response.json()["type"] == "/problems/invalid-write-key"
