"""Scheduled crawls on the real PostgreSQL, Kafka and FerretDB: a source connector with ``schedule: {interval_s}``
configured through the admin API is crawled by the worker on its own, again after the interval (a table created
meanwhile is published without anyone asking), not earlier after a worker restart (the last run's start is in
MongoDB), and of two workers claiming one due run at the same moment exactly one gets it.

The API refuses an interval under ``connect.schedule_min_interval_s`` with problem+json naming the field; the test's
own API lowers that minimum to 1 s so two crawls fit in seconds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from connectors.postgres import PostgresCatalogConnector
from connectors.runtime.worker import create_app
from control.connectors.schedule import ScheduleDoc, ScheduleStore
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CONTROL_DATABASE, PRIORITY_TOPIC
from tests._support.kafka_tail import mark, of_tenant, read_since
from tests._support.pgit import connect, scratch_database
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import admin_api, connectors_route, tenant_admin, worker_settings

pytestmark = pytest.mark.integration

WITH_PG = {**PLUGINS, "postgres": PostgresCatalogConnector}


@pytest.fixture
def database(settings: Settings, stack: StackManager) -> Iterator[str]:
    with scratch_database(settings, "CREATE TABLE public.first (id bigint PRIMARY KEY)") as name:
        yield name


def _spec(settings: Settings, database: str, interval_s: int) -> dict[str, Any]:
    config = {
        "host": "127.0.0.1", "port": settings.stack.ports.postgres, "user": "metalake", "password": "unused-trust",
        "instance": "it", "databases": [database],
        "sslmode": "disable",  # the stack's PostgreSQL has no TLS: the explicit opt-out from verify-full
    }  # fmt: skip
    return {"type": "postgres", "config": config, "schedule": {"interval_s": interval_s}}


def _worker(settings: Settings) -> TestClient:
    local = worker_settings(settings, ssrf_allow=["127.0.0.0/8"], allow_passwordless_sources=True, schedule_poll_s=0.3)
    return TestClient(create_app(local, plugins=WITH_PG))


def _schedule(mongo: MongoClient[dict[str, Any]], tenant: str) -> ScheduleDoc | None:
    return ScheduleStore(mongo[CONTROL_DATABASE]).get(f"{tenant}/pg")


def _wait(what: str, check: Any, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"{what}: not within {timeout_s:.0f}s")


def test_a_scheduled_connector_is_crawled_every_interval_and_a_restart_keeps_the_schedule(
    api: TestClient, settings: Settings, tenant: str, database: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    admin = tenant_admin(api, tenant)
    route = connectors_route(tenant)
    # The default minimum (300 s) and the model's bounds, each answered with problem+json naming the field.
    for interval, field in ((1, "schedule/interval_s"), (0, "schedule/interval_s")):
        refused = api.post(route, json={"name": "pg", **_spec(settings, database, interval)}, headers=admin)
        assert refused.status_code == 422 and refused.headers["content-type"] == "application/problem+json"
        assert refused.json()["field"] == field, refused.text

    quick = settings.model_copy(deep=True)
    quick.connect.schedule_min_interval_s = 1
    with admin_api(quick) as short_api:
        created = short_api.post(route, json={"name": "pg", **_spec(settings, database, 2)}, headers=admin)
        assert created.status_code == 201, created.text
        assert created.json()["schedule"] == {"interval_s": 2}

        marker = mark(settings, PRIORITY_TOPIC)
        with _worker(settings):
            first = _wait("a first scheduled crawl", lambda: (_schedule(mongo, tenant) or {}).get("last_outcome"))
            assert first == "done"
            shown = short_api.get(f"{route}/pg/status", headers=admin).json()["schedule"]
            assert shown["interval_s"] == 2 and shown["last_outcome"] == "done" and shown["last_records"] >= 3
            started = datetime.fromisoformat(shown["last_started_at"].replace("Z", "+00:00"))
            assert datetime.fromisoformat(shown["next_run_at"].replace("Z", "+00:00")) - started == timedelta(seconds=2)
            table = asset_urn("postgres", "it", database, "public", "first")
            got = read_since(settings, PRIORITY_TOPIC, marker, of_tenant(tenant), expect=3, settle_s=0.5)
            assert any(table.encode() in (r.value or b"") for r in got)

            # Nobody asks for a crawl: the next interval publishes the table created meanwhile.
            marker = mark(settings, PRIORITY_TOPIC)
            with connect(settings, database) as conn:
                conn.execute("CREATE TABLE public.second (id bigint PRIMARY KEY)")
            second = asset_urn("postgres", "it", database, "public", "second")
            got = read_since(settings, PRIORITY_TOPIC, marker, of_tenant(tenant), expect=1, timeout_s=30, settle_s=0)
            assert any(second.encode() in (r.value or b"") for r in got)

        # A long interval now; a new worker reads the last run's start from MongoDB and does not run it early.
        put = short_api.put(f"{route}/pg", json=_spec(settings, database, 3600), headers=admin)
        assert put.status_code == 200 and put.json()["schedule"] == {"interval_s": 3600}
    before = _wait("the last run recorded", lambda: _schedule(mongo, tenant))
    _wait("the last run finished", lambda: (_schedule(mongo, tenant) or {}).get("last_finished_at"))
    with _worker(settings):
        time.sleep(2)  # several looks of the scheduler (every 0.3 s)
    after = _schedule(mongo, tenant)
    assert after is not None and after["last_started_at"] == before["last_started_at"]

    # Deleting the connector forgets its schedule.
    assert api.delete(f"{route}/pg", headers=admin).status_code == 204
    assert _schedule(mongo, tenant) is None


def test_of_two_workers_claiming_one_due_run_at_once_exactly_one_gets_it(
    settings: Settings, stack: StackManager, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    stores = [ScheduleStore(mongo[CONTROL_DATABASE]) for _ in range(4)]
    moment = datetime.now(UTC)
    for attempt in range(3):  # the first claim (no document yet), then two later runs
        barrier = threading.Barrier(len(stores))
        claims: list[datetime | None] = []

        def claim(store: ScheduleStore, gate: threading.Barrier = barrier, out: list[datetime | None] = claims) -> None:
            gate.wait()
            out.append(store.claim(f"{tenant}/pg", tenant, "pg", 5, moment, f"worker-{id(store)}"))

        threads = [threading.Thread(target=claim, args=(s,)) for s in stores]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        assert len([c for c in claims if c is not None]) == 1, (attempt, claims)
        # Not due again within the interval, whoever asks.
        assert stores[0].claim(f"{tenant}/pg", tenant, "pg", 5, moment, "late") is None
        # As if that run had started (attempt + 1) days ago: due again.
        mongo[CONTROL_DATABASE]["connector_schedules"].update_one(
            {"_id": f"{tenant}/pg"}, {"$set": {"last_started_at": moment - timedelta(days=attempt + 1)}}
        )
    ScheduleStore(mongo[CONTROL_DATABASE]).forget(f"{tenant}/pg")
