"""``POST /api/v1/lineage`` on the worker app over fakes: authenticated as the ingest API, all or nothing, 201 only once
Kafka confirmed, problem+json naming the JSON pointer, bounded bodies (gzip included)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from metalake.http.problems import MEDIA_TYPE
from metalake.urn import asset_urn
from tests._support.runtime_fakes import WRITE_KEY, World, access_token

PATH = "/api/v1/lineage"
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}
DBT = json.loads((Path(__file__).parent / "payloads" / "dbt_complete.json").read_text())
ORDERS = asset_urn("postgres", "warehouse.internal:5432", "jaffle", "dev", "orders")


def test_a_run_event_is_published_whole_and_answered_201(client: TestClient, world: World) -> None:
    response = client.post(PATH, json=DBT, headers=AUTH)
    assert response.status_code == 201, response.text
    assert response.json() == {
        "kind": "run",
        "eventType": "COMPLETE",
        "accepted": 12,
        "assets": 3,
        "columns": 7,
        "edges": 2,
        "column_edges": 0,
    }
    events = [r.event for r in world.publisher.routed]
    assert len(events) == 12 and all(e.tenantid == "acme" for e in events)
    assert {r.topic_class for r in world.publisher.routed} == {"priority", "bulk"}
    assert ORDERS in {e.data["urn"] for e in events}
    assert all(e.partitionkey == f"acme:{e.subject}" for e in events)


def test_an_access_token_with_events_write_names_the_tenant(client: TestClient, world: World) -> None:
    token = access_token(scope="tenant:read events:write", tenant="globex")
    response = client.post(PATH, json=DBT, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 201, response.text
    assert {r.event.tenantid for r in world.publisher.routed} == {"globex"}


@pytest.mark.parametrize(
    ("headers", "status", "slug"),
    [
        ({}, 401, "invalid-write-key"),
        ({"Authorization": "Bearer mlk_k1_wrong"}, 401, "invalid-write-key"),
        ({"Authorization": "Basic dXNlcjpwYXNz"}, 401, "invalid-write-key"),
    ],
)
def test_no_or_a_wrong_credential_is_401(
    client: TestClient, world: World, headers: dict[str, str], status: int, slug: str
) -> None:
    response = client.post(PATH, json=DBT, headers=headers)
    assert response.status_code == status and response.json()["type"] == f"/problems/{slug}"
    assert world.publisher.routed == []


def test_a_token_without_events_write_is_403(client: TestClient, world: World) -> None:
    token = access_token(scope="tenant:read sql:read")
    response = client.post(PATH, json=DBT, headers={"Authorization": f"Bearer {token}"})
    assert response.status_code == 403 and world.publisher.routed == []


def test_a_suspended_tenant_is_403(client: TestClient, world: World) -> None:
    world.tenants.suspend("acme")
    response = client.post(PATH, json=DBT, headers=AUTH)
    assert response.status_code == 403 and response.json()["type"] == "/problems/tenant-suspended"
    assert world.publisher.routed == []


def test_a_bad_facet_deep_in_the_event_is_400_naming_it_and_nothing_is_published(
    client: TestClient, world: World
) -> None:
    event: dict[str, Any] = json.loads(json.dumps(DBT))
    event["outputs"][0]["facets"]["schema"]["fields"][3] = {"name": 5}
    response = client.post(PATH, json=event, headers=AUTH)
    assert response.status_code == 400
    assert response.headers["content-type"] == MEDIA_TYPE
    body = response.json()
    assert body["type"] == "/problems/invalid-lineage-event"
    assert body["field"] == "/outputs/0/facets/schema/fields/3/name"
    # The assets and columns mapped before the bad field were not published either.
    assert world.publisher.routed == []


@pytest.mark.parametrize(
    ("body", "headers", "status", "field"),
    [
        (b"{nope", {}, 400, "body"),
        (b'{"eventTime": NaN}', {}, 400, "body"),
        (b"[" * 100_000 + b"]" * 100_000, {}, 400, "body"),
        (json.dumps(DBT).encode(), {"Content-Type": "text/plain"}, 415, "content-type"),
        (json.dumps(DBT).encode(), {"Content-Encoding": "br"}, 415, "content-encoding"),
        (b"not gzip", {"Content-Encoding": "gzip"}, 400, "content-encoding"),
        (gzip.compress(json.dumps(DBT).encode())[:-12], {"Content-Encoding": "gzip"}, 400, "content-encoding"),
    ],
)
def test_bodies_that_are_refused(
    client: TestClient, world: World, body: bytes, headers: dict[str, str], status: int, field: str
) -> None:
    response = client.post(PATH, content=body, headers={"Content-Type": "application/json", **AUTH, **headers})
    assert response.status_code == status, response.text
    assert response.json()["field"] == field
    assert world.publisher.routed == []


def test_a_gzip_body_as_the_transport_compresses_it(client: TestClient, world: World) -> None:
    body = gzip.compress(json.dumps(DBT).encode(), compresslevel=3)
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", **AUTH}
    response = client.post(PATH, content=body, headers=headers)
    assert response.status_code == 201, response.text
    assert len(world.publisher.routed) == 12


def test_a_gzip_bomb_is_413_and_never_inflated_whole(client: TestClient, world: World) -> None:
    world.settings.connect.openlineage_max_body_bytes = 64 * 1024
    bomb = gzip.compress(b" " * (50 * 1024 * 1024))
    assert len(bomb) < 64 * 1024
    headers = {"Content-Type": "application/json", "Content-Encoding": "gzip", **AUTH}
    response = client.post(PATH, content=bomb, headers=headers)
    assert response.status_code == 413 and world.publisher.routed == []


def test_a_body_over_the_limit_is_413(client: TestClient, world: World) -> None:
    world.settings.connect.openlineage_max_body_bytes = 1024
    response = client.post(PATH, json=DBT, headers=AUTH)
    assert response.status_code == 413 and world.publisher.routed == []


def test_an_event_that_would_flood_the_topics_is_413(client: TestClient, world: World) -> None:
    world.settings.connect.openlineage_max_events = 5
    response = client.post(PATH, json=DBT, headers=AUTH)
    assert response.status_code == 413 and response.json()["type"] == "/problems/too-many-events"
    assert world.publisher.routed == []


def test_kafka_down_is_503_with_retry_after(client: TestClient, world: World) -> None:
    world.publisher.down = True
    response = client.post(PATH, json=DBT, headers=AUTH)
    assert response.status_code == 503 and response.headers["retry-after"] == "30"
    assert WRITE_KEY not in response.text


def test_the_write_key_is_never_logged(client: TestClient, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("DEBUG")
    client.post(PATH, json=DBT, headers=AUTH)
    client.post(PATH, json={"job": {}}, headers=AUTH)
    assert WRITE_KEY not in caplog.text and "supersecret" not in caplog.text
