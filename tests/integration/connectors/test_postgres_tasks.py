"""The PostgreSQL crawler split into tasks, through the runtime, on the real PostgreSQL, Kafka and FerretDB.

A fresh database of 5 schemas x 12 tables x 3 columns (and the empty ``public``); the connector is configured through
the admin API with ``tasks.max=3`` (7 units: the database row and 6 schemas, so 3, 2 and 2 per task), crawled
with ``crawl`` as ``metalake connect crawl`` does, and what reached Kafka is read back: every table exactly once, a
DROP deleted by its owner only, and a re-split to 2 tasks without a single event.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

from connectors.postgres import PostgresCatalogConnector
from connectors.runtime.context import Runtime
from connectors.runtime.source_runner import CrawlRefused, crawl
from connectors.runtime.worker import build_runtime
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import BULK_TOPIC, PRIORITY_TOPIC
from tests._support.kafka_tail import Record, mark, of_tenant, read_since
from tests._support.pgit import connect, scratch_database
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import connectors_route, tenant_admin, worker_settings

pytestmark = pytest.mark.integration

SCHEMAS = ("alpha", "beta", "delta", "gamma", "omega")
TABLES = 12
WITH_PG = {**PLUGINS, "postgres": PostgresCatalogConnector}

_POPULATE = """
DO $$
DECLARE s text; i int;
BEGIN
  FOREACH s IN ARRAY ARRAY['alpha', 'beta', 'delta', 'gamma', 'omega'] LOOP
    EXECUTE format('CREATE SCHEMA %I', s);
    FOR i IN 0..11 LOOP
      EXECUTE format('CREATE TABLE %I.%I (id bigint PRIMARY KEY, name text, amount numeric(12,2))',
        s, 't' || lpad(i::text, 2, '0'));
    END LOOP;
  END LOOP;
END $$;
"""


@pytest.fixture
def database(settings: Settings, stack: StackManager) -> Iterator[str]:
    with scratch_database(settings, _POPULATE) as name:
        yield name


@pytest.fixture
def pg_runtime(settings: Settings, stack: StackManager) -> Iterator[Runtime]:
    # The stack's PostgreSQL: on loopback with trust authentication, what the local stack lets connectors reach.
    local = worker_settings(settings, source_batch_size=50, ssrf_allow=["127.0.0.0/8"], allow_passwordless_sources=True)
    built = build_runtime(local, plugins=WITH_PG)
    yield built
    built.publisher.close()
    built.offsets.close()


def _put(api: TestClient, admin: dict[str, str], settings: Settings, tenant: str, database: str, tasks: int) -> None:
    """Create the connector ``pg`` (its first configuration) or replace its configuration."""
    spec = {
        "type": "postgres",
        "config": {
            "host": "127.0.0.1", "port": settings.stack.ports.postgres, "user": "metalake", "password": "unused-trust",
            "instance": "it", "sslmode": "disable",  # the stack's PostgreSQL has no TLS: the explicit opt-out
            "databases": [database], "fetch_size": 100,
        },
        "tasks.max": tasks,
    }  # fmt: skip
    route = connectors_route(tenant, "pg")
    if api.get(route, headers=admin).status_code == 404:
        answer = api.post(connectors_route(tenant), json={"name": "pg", **spec}, headers=admin)
    else:
        answer = api.put(route, json=spec, headers=admin)
    assert answer.status_code in (200, 201), answer.text
    assert answer.json()["tasks_max"] == tasks


def _urn(database: str, *path: str) -> str:
    return asset_urn("postgres", "it", database, *path)


def _events(records: list[Record]) -> list[tuple[str, str]]:
    """(type suffix, urn) per Kafka record."""
    out = []
    for r in records:
        kind = r.headers["ce_type"].decode().removeprefix("io.metalake.").removesuffix(".v1")
        out.append((kind, json.loads(r.value or b"{}")["urn"]))
    return out


def _task_units(api: TestClient, admin: dict[str, str], tenant: str) -> list[set[tuple[str, ...]]]:
    tasks = api.get(connectors_route(tenant, "pg") + "/tasks", headers=admin).json()["tasks"]
    assert [t["id"] for t in tasks] == list(range(len(tasks)))
    return [{tuple(u) for u in t["config"]["units"]} for t in tasks]


def test_tasks_split_emit_once_delete_by_owner_and_resplit_quietly(
    api: TestClient, pg_runtime: Runtime, settings: Settings, tenant: str, database: str
) -> None:
    admin = tenant_admin(api, tenant)
    route = connectors_route(tenant, "pg")
    too_few = {"name": "pg", "type": "postgres", "tasks_max": 0}
    too_many = api.post(connectors_route(tenant), json=too_few, headers=admin)
    assert too_many.status_code == 422 and too_many.headers["content-type"] == "application/problem+json"
    _put(api, admin, settings, tenant, database, 3)
    status = api.get(f"{route}/status", headers=admin).json()
    assert status["connector"]["state"] == "RUNNING" and status["tasks"] == []  # no split before the first crawl

    # 1. Three tasks, every table and column emitted exactly once across them.
    marks = mark(settings, PRIORITY_TOPIC), mark(settings, BULK_TOPIC)
    report = crawl(pg_runtime, tenant, "pg")
    assert not report.failed and [t.task for t in report.tasks] == [0, 1, 2]
    assert all(t.records > 0 for t in report.tasks)
    tables = TABLES * len(SCHEMAS)
    schemas = len(SCHEMAS) + 1  # and public
    assert report.per_kind == {"database": 1, "schema": schemas, "table": tables, "column": tables * 3}
    priority = read_since(settings, PRIORITY_TOPIC, marks[0], of_tenant(tenant), expect=1 + schemas + tables)
    bulk = read_since(settings, BULK_TOPIC, marks[1], of_tenant(tenant), expect=tables * 3)
    emitted = Counter(_events(priority) + _events(bulk))
    expected = {_urn(database, s, f"t{i:02d}") for s in SCHEMAS for i in range(TABLES)}
    assert {u for (k, u) in emitted if k == "asset.upserted" and u.count("/") == 3} == expected
    assert set(emitted.values()) == {1} and len(emitted) == 1 + schemas + tables * 4

    units = _task_units(api, admin, tenant)
    assert [len(u) for u in units] == [3, 2, 2]
    assert set().union(*units) == {(database,), *((database, s) for s in (*SCHEMAS, "public"))}  # complete
    assert sum(len(u) for u in units) == 7  # disjoint

    status = api.get(f"{route}/status", headers=admin).json()
    assert status["name"] == "pg" and status["type"] == "source" and status["connector"]["state"] == "RUNNING"
    assert [(t["id"], t["state"]) for t in status["tasks"]] == [(0, "RUNNING"), (1, "RUNNING"), (2, "RUNNING")]
    assert all(t["worker_id"] and t["trace"] is None for t in status["tasks"])
    assert [t["last_run"]["records"] for t in status["tasks"]] == [t.records for t in report.tasks]

    # 2. A DROP is deleted by the task owning its schema, and only by it.
    with connect(settings, database) as conn:
        conn.execute("DROP TABLE gamma.t07")
    owner = next(i for i, u in enumerate(units) if (database, "gamma") in u)
    marks = mark(settings, PRIORITY_TOPIC), mark(settings, BULK_TOPIC)
    report = crawl(pg_runtime, tenant, "pg")
    assert not report.failed
    assert [(t.records, t.deletions) for t in report.tasks] == [(4, 4) if i == owner else (0, 0) for i in range(3)]
    dropped = _urn(database, "gamma", "t07")
    deleted = _events(read_since(settings, PRIORITY_TOPIC, marks[0], of_tenant(tenant), expect=4))
    columns = [f"{dropped}/{c}" for c in ("id", "name", "amount")]
    assert sorted(deleted) == sorted(("asset.deleted", u) for u in [dropped, *columns])  # keys differ: any order
    assert read_since(settings, BULK_TOPIC, marks[1], of_tenant(tenant), expect=0) == []

    # 3. Re-split from 3 to 2 tasks: partitions change owners, and nothing is emitted, least of all a deletion.
    _put(api, admin, settings, tenant, database, 2)
    marks = mark(settings, PRIORITY_TOPIC), mark(settings, BULK_TOPIC)
    report = crawl(pg_runtime, tenant, "pg")
    assert not report.failed and len(report.tasks) == 2
    assert [(t.records, t.deletions) for t in report.tasks] == [(0, 0), (0, 0)]
    assert sum(t.partitions for t in report.tasks) == 1 + schemas + tables - 1  # every stored partition handed
    assert read_since(settings, PRIORITY_TOPIC, marks[0], of_tenant(tenant), expect=0, settle_s=3) == []
    assert read_since(settings, BULK_TOPIC, marks[1], of_tenant(tenant), expect=0, settle_s=1) == []
    assert [len(u) for u in _task_units(api, admin, tenant)] == [4, 3]
    status = api.get(f"{route}/status", headers=admin).json()
    assert [(t["id"], t["state"]) for t in status["tasks"]] == [(0, "RUNNING"), (1, "RUNNING")]

    # 4. After the re-split, a change is picked up by its new owner; pausing shows the tasks PAUSED. A crawl that
    # starts while another holds the connector's lease (another machine's scheduler) is refused and emits nothing.
    with connect(settings, database) as conn:
        conn.execute("ALTER TABLE omega.t00 ADD COLUMN region text")
    assert pg_runtime.leases is not None
    with pg_runtime.leases.held(f"{tenant}/pg/crawl", ttl_s=30, owner="other-host:4242:x"):
        with pytest.raises(CrawlRefused, match=f"{tenant}/pg is being crawled already: .* held by other-host:4242"):
            crawl(pg_runtime, tenant, "pg")
    report = crawl(pg_runtime, tenant, "pg")
    assert sorted((t.records, t.deletions) for t in report.tasks) == [(0, 0), (5, 0)]  # the table and its 4 columns
    status = api.post(f"{route}/pause", headers=admin).json()
    assert [t["state"] for t in status["tasks"]] == ["PAUSED", "PAUSED"]
    assert api.delete(route, headers=admin).status_code == 204
    assert pg_runtime.store.tasks.of(tenant, "pg") == []
