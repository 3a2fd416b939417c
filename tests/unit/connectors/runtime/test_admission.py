"""One tenant must not take the connector worker from the others (issue 21): its requests to the HTTP sources are
admitted before their bodies are read (in-flight cap, events budget charged by an estimate and settled by the events
produced), and their parsing and mapping runs off the event loop."""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

import connectors.ingest.routes as ingest_routes
import connectors.openlineage.routes as lineage_routes
from connectors.runtime.worker import create_app
from metalake.http.ratelimit import RateLimiter
from metalake.urn import asset_urn
from tests._support.runtime_fakes import WRITE_KEY, World, access_token

LINEAGE = "/api/v1/lineage"
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}  # tenant acme
ORDERS = asset_urn("pg", "prod", "shop", "public", "orders")
DBT = json.loads((Path(__file__).parents[1] / "openlineage" / "payloads" / "dbt_complete.json").read_text())


def _globex() -> dict[str, str]:
    return {"Authorization": f"Bearer {access_token(scope='tenant:read events:write', tenant='globex')}"}


def _event(i: int, tenant: str = "acme") -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"ev-{i}",
        "source": "/producers/test",
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": tenant,
        "data": {"urn": ORDERS, "version": i, "kind": "table", "name": "orders"},
    }


@pytest.fixture
def reads(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The tenants whose request bodies the routes read (read_limited wrapped)."""
    seen: list[str] = []
    original = lineage_routes.read_limited

    async def spy(request: Any, limit: int, problem: Any = None) -> bytes:
        seen.append(request.headers.get("x-who", "?"))
        return await original(request, limit, problem)

    monkeypatch.setattr(lineage_routes, "read_limited", spy)
    monkeypatch.setattr(ingest_routes, "read_limited", spy)
    return seen


@pytest.fixture
def blocked_mapping(monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[threading.Event, threading.Event]]:
    """OpenLineage's mapping made to wait (up to 5 s) until released, its first call only: (entered, release)."""
    entered, release = threading.Event(), threading.Event()
    original = lineage_routes.map_event

    def slow(*args: Any, **kwargs: Any) -> Any:
        if not entered.is_set():
            entered.set()
            release.wait(5)
        return original(*args, **kwargs)

    monkeypatch.setattr(lineage_routes, "map_event", slow)
    yield entered, release
    release.set()


def _app(world: World, **connect: Any) -> TestClient:
    settings = world.settings.model_copy(deep=True)
    for name, value in {"parse_workers": 0, **connect}.items():  # in this process: the monkeypatches apply
        setattr(settings.connect, name, value)
    runtime = dataclasses.replace(world.runtime, settings=settings, admission=None, offload=None)
    return TestClient(create_app(settings, runtime=runtime))


def test_a_tenant_over_its_in_flight_cap_is_refused_before_its_body_is_read(
    world: World, reads: list[str], blocked_mapping: tuple[threading.Event, threading.Event]
) -> None:
    entered, release = blocked_mapping
    with _app(world, tenant_max_in_flight=1) as client, ThreadPoolExecutor(1) as pool:
        first = pool.submit(client.post, LINEAGE, json=DBT, headers={**AUTH, "x-who": "first"})
        assert entered.wait(5)
        # Not JSON: had it been read and parsed it would be a 400.
        over = client.post(
            LINEAGE, content=b"{not json", headers={**AUTH, "x-who": "over", "content-type": "application/json"}
        )
        assert over.status_code == 429, over.text
        assert over.json()["type"] == "/problems/tenant-concurrency-limit"
        assert over.headers["retry-after"] == "1" and over.headers["connection"] == "close"
        other = client.post(LINEAGE, json=DBT, headers={**_globex(), "x-who": "globex"})  # another tenant: its own cap
        release.set()
        assert first.result(10).status_code == 201
    assert other.status_code == 201, other.text
    assert reads == ["first", "globex"]
    assert {r.event.tenantid for r in world.publisher.routed} == {"acme", "globex"}


def test_another_tenants_request_is_served_while_one_tenants_body_is_mapped(
    world: World, blocked_mapping: tuple[threading.Event, threading.Event]
) -> None:
    # The mapping of one tenant's OpenLineage event ran on the event loop: every other request waited for it.
    entered, release = blocked_mapping
    with _app(world) as client, ThreadPoolExecutor(1) as pool:
        slow = pool.submit(client.post, LINEAGE, json=DBT, headers=AUTH)
        assert entered.wait(5)
        started = time.monotonic()
        other = client.post("/v1/events", json=[_event(1, "globex")], headers=_globex())
        waited = time.monotonic() - started
        assert not slow.done(), "the mapping was released before the other tenant's request was answered"
        release.set()
        assert slow.result(10).status_code == 201
    assert other.status_code == 200 and other.json()["accepted"] == 1, other.text
    assert waited < 4


def test_a_spent_budget_refuses_before_the_body_is_read_and_a_request_is_charged_its_events(
    world: World, reads: list[str]
) -> None:
    now = [0.0]
    world.runtime = dataclasses.replace(world.runtime, event_budget=RateLimiter(10.0, 20, clock=lambda: now[0]))
    with _app(world, tenant_event_bytes=100_000) as client:
        # 12 events estimated as 1 up front, charged 12 once mapped: 8 left.
        assert client.post(LINEAGE, json=DBT, headers={**AUTH, "x-who": "a"}).status_code == 201
        # 12 more than the 8 left: refused (nothing published), and charged all the same (the work was done).
        over = client.post(LINEAGE, json=DBT, headers={**AUTH, "x-who": "b"})
        assert over.status_code == 429 and over.json()["type"] == "/problems/rate-limited", over.text
        assert over.headers["retry-after"] == "2"  # (12 - (-4)) / 10 s: a resend then fits
        # In debt: refused at admission, its body never read.
        early = client.post(LINEAGE, json=DBT, headers={**AUTH, "x-who": "c"})
        assert early.status_code == 429 and early.headers["connection"] == "close"
        now[0] += 1.6
        assert client.post(LINEAGE, json=DBT, headers={**AUTH, "x-who": "d"}).status_code == 201
    assert reads == ["a", "b", "d"]
    assert len(world.publisher.routed) == 24


def test_the_estimate_follows_the_declared_length(world: World) -> None:
    now = [0.0]
    world.runtime = dataclasses.replace(world.runtime, event_budget=RateLimiter(1.0, 5, clock=lambda: now[0]))
    body = json.dumps([_event(i) for i in range(2)]).encode()
    with _app(world, tenant_event_bytes=len(body) // 10) as client:
        # Estimated at 10 events (clamped to the burst of 5): admitted on a full bucket, then settled at 2.
        first = client.post("/v1/events", content=body, headers={**AUTH, "content-type": "application/json"})
        assert first.status_code == 200 and first.json()["accepted"] == 2, first.text
        # 3 left: a body estimated at 5 (the burst) is refused before it is read.
        second = client.post("/v1/events", content=body, headers={**AUTH, "content-type": "application/json"})
        assert second.status_code == 429 and second.headers["retry-after"] == "2"
    assert len(world.publisher.routed) == 2
