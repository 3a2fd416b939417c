"""Connectors through the admin API with real tokens, against the real control plane, offsets topic and worker.

A Monte Carlo connector made through the API is served by the connector worker (its own app, same FerretDB): the
signing secrets rotated through the API are the ones the worker verifies, and pausing through the API stops it.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from api.services.audit import tenant_audit_path
from connectors.runtime.worker import create_app as create_worker
from control.audit import AuditQuery, read
from control.connectors.records import ConnectorState
from control.connectors.store import ControlStore
from metalake.sealing import is_sealed
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CONTROL_DATABASE
from tests._support.itest import wait_for
from tests._support.sealing import stack_sealer
from tests._support.tokens import auth_headers
from tests._support.worker_helpers import worker_settings

pytestmark = pytest.mark.integration

MC_CONFIG = {"default_platform": "snowflake", "default_instance": "acme"}


@pytest.fixture
def api(settings: Settings, control: MongoClient[dict[str, Any]]) -> Iterator[TestClient]:
    with TestClient(create_app(settings, mongo=control)) as client:
        yield client


@pytest.fixture
def worker(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    with TestClient(create_worker(worker_settings(settings))) as client:
        yield client


def mc_delivery(secret: str) -> tuple[bytes, dict[str, str]]:
    """A fresh Monte Carlo incident delivery (new id: never a duplicate), signed as Monte Carlo signs."""
    incident = str(uuid.uuid4())
    body = json.dumps(
        {
            "account": {"id": "9a59c6f1-203a-4c72-8cd7-132db7f21b92"},
            "action": "incident",
            "type": "open_anomaly_incident",
            "version": "v0.1",
            "payload": {
                "incident_id": incident,
                "group_id": "zeus:ares",
                "url": f"https://getmontecarlo.com/incidents/{incident}",
                "event_list": [{"event_details": "Has 42 rows vs. 101 expected", "table_name": "artemis"}],
            },
        }
    ).encode()
    message = urllib.parse.urlencode(json.loads(body)).encode("utf8")
    signature = hmac.new(secret.encode(), message, hashlib.sha512).hexdigest()
    return body, {"x-mcd-signature": signature, "content-type": "application/json"}


def deliver(worker: TestClient, tenant: str, secret: str) -> int:
    body, headers = mc_delivery(secret)
    return worker.post(f"/webhooks/monte-carlo/{tenant}", content=body, headers=headers).status_code


def eventually(worker: TestClient, tenant: str, secret: str, status: int) -> None:
    """A worker caches its control-plane reads for ``connect.lookup_cache_ttl_s`` (2 s by default; the test worker's
    ``worker_settings`` turn it off): a change made through the API (another process) is seen within that. Only a 202
    publishes, so the attempts before it leave no trace."""
    wait_for(f"a delivery answered {status}", lambda: deliver(worker, tenant, secret) == status or None, timeout_s=15)


def problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    if field is not None:
        assert body["field"] == field, body
    return body


def test_plugins_and_their_schemas_are_served(api: TestClient, tenant: str) -> None:
    reader = auth_headers(api, tenant=tenant, role="read-only")
    plugins = {p["name"]: p for p in api.get("/v1/connector-plugins", headers=reader).json()}
    assert plugins["montecarlo"]["kind"] == "webhook" and plugins["postgres"]["kind"] == "source"
    schema = api.get("/v1/connector-plugins/montecarlo/schema", headers=reader).json()["config_schema"]
    assert set(schema["required"]) == {"default_platform", "default_instance"}
    problem(api.get("/v1/connector-plugins/nope/schema", headers=reader), 404, "type")
    assert api.get("/v1/connector-plugins").status_code == 401


def test_config_is_validated_against_the_plugins_schema(api: TestClient, tenant: str) -> None:
    admin = auth_headers(api, tenant=tenant, role="admin")
    route = f"/v1/tenants/{tenant}/connectors"
    missing = {"name": "mc", "type": "montecarlo", "config": {"default_platform": "snowflake"}}
    problem(api.post(route, json=missing, headers=admin), 422, "config/default_instance")
    typo = {"name": "mc", "type": "montecarlo", "config": {**MC_CONFIG, "default_instanse": "x"}}
    problem(api.post(route, json=typo, headers=admin), 422, "config/default_instanse")
    nested = {"name": "pg", "type": "postgres", "config": {"host": "h", "user": "u", "instance": "i", "port": 0}}
    problem(api.post(route, json=nested, headers=admin), 422, "config/port")
    # The crawler is no way into the worker's network: one network host, a password, database names only.
    pg = {"host": "db.example.com", "user": "u", "password": "pw", "instance": "i"}
    for bad, field in (
        ({"host": "/var/run/postgresql"}, "config/host"),
        ({"host": "@abstract"}, "config/host"),
        ({"host": "a.example.com,10.0.0.1"}, "config/host"),
        ({"password": ""}, "config/password"),
        ({"password": None}, "config/password"),
        ({"databases": ["host=/tmp dbname=x"]}, "config/databases"),
        ({"maintenance_database": "service=internal"}, "config/maintenance_database"),
    ):
        body = {"name": "pg", "type": "postgres", "config": {**pg, **bad}}
        problem(api.post(route, json=body, headers=admin), 422, field)
    problem(api.post(route, json={"name": "x", "type": "nope"}, headers=admin), 422, "type")
    problem(api.post(route, json={"name": "bad name", "type": "montecarlo", "config": MC_CONFIG}, headers=admin), 422)
    webhook_tasks = {"name": "mc", "type": "montecarlo", "config": MC_CONFIG, "tasks_max": 3}
    problem(api.post(route, json=webhook_tasks, headers=admin), 422, "tasks_max")
    assert api.get(route, headers=admin).json() == {"items": [], "next_cursor": None}


def test_source_connector_secret_fields_are_write_only(api: TestClient, tenant: str) -> None:
    admin = auth_headers(api, tenant=tenant, role="admin")
    route = f"/v1/tenants/{tenant}/connectors"
    password = "pg-" + uuid.uuid4().hex
    config = {"host": "db.internal", "user": "crawler", "password": password, "instance": "shop"}
    created = api.post(route, json={"name": "pg", "type": "postgres", "config": config, "tasks_max": 3}, headers=admin)
    assert created.status_code == 201, created.text
    assert created.json()["config"]["password"] == "**********" and created.json()["tasks_max"] == 3
    # Replacing with the mask keeps the stored password; nothing returns it.
    kept = {**config, "password": "**********", "databases": ["shop"]}
    replaced = api.put(f"{route}/pg", json={"type": "postgres", "config": kept, "tasks_max": 2}, headers=admin)
    assert replaced.status_code == 200, replaced.text
    # ...but not to another endpoint: a new host or port needs the password again.
    for moved in ({"port": 5433}, {"host": "elsewhere.internal"}):
        body = {"type": "postgres", "config": {**kept, **moved}, "tasks_max": 2}
        problem(api.put(f"{route}/pg", json=body, headers=admin), 422, "config/password")
    database = MongoClient(api.app.state.ctx.settings.mongo_uri)[CONTROL_DATABASE]  # type: ignore[attr-defined]
    store = ControlStore(database, stack_sealer())
    assert store.secrets.config(tenant, "pg")["password"].get_secret_value() == password
    # At rest the password is sealed, bound to this tenant, connector and field.
    raw = database["connector_secrets"].find_one({"_id": f"{tenant}/pg"})
    assert raw is not None and password not in str(raw) and is_sealed(raw["config"]["password"])
    for response in (replaced, api.get(f"{route}/pg", headers=admin), api.get(route, headers=admin)):
        assert password not in response.text
    problem(api.post(f"{route}/pg/secrets", json={}, headers=admin), 409, "name")
    status = api.get(f"{route}/pg/status", headers=admin).json()
    assert status == {
        "name": "pg",
        "type": "source",
        "connector": {"state": "RUNNING", "error": None, "updated_at": status["connector"]["updated_at"]},
        "tasks": [],
        "schedule": None,  # not scheduled
    }


def test_webhook_connector_lifecycle_with_secret_rotation(
    api: TestClient, worker: TestClient, settings: Settings, tenant: str
) -> None:
    admin = auth_headers(api, tenant=tenant, role="admin")
    reader = auth_headers(api, tenant=tenant, role="read-only")
    route = f"/v1/tenants/{tenant}/connectors"
    body = {"name": "monte-carlo", "type": "montecarlo", "config": MC_CONFIG}
    problem(api.post(route, json=body, headers=reader), 403)
    created = api.post(route, json=body, headers=admin)
    assert created.status_code == 201, created.text
    assert created.headers["location"] == f"{route}/monte-carlo"
    assert created.json()["state"] == "RUNNING" and created.json()["kind"] == "webhook"
    problem(api.post(route, json=body, headers=admin), 409, "name")
    assert [c["name"] for c in api.get(route, headers=reader).json()["items"]] == ["monte-carlo"]

    # No secret yet: the worker refuses every delivery.
    assert deliver(worker, tenant, "whatever-secret-0123456789") == 403
    generated = api.post(f"{route}/monte-carlo/secrets", json={}, headers=admin)
    assert generated.status_code == 201, generated.text
    old = generated.json()["secret"]
    new = "new-secret-" + uuid.uuid4().hex
    rotated = api.post(f"{route}/monte-carlo/secrets", json={"secret": new}, headers=admin)
    assert rotated.status_code == 201 and "secret" not in rotated.json() and new not in rotated.text
    assert [s["id"] for s in rotated.json()["active"]] == [rotated.json()["id"], generated.json()["id"]]
    listed = api.get(f"{route}/monte-carlo/secrets", headers=reader)
    assert len(listed.json()["active"]) == 2 and old not in listed.text and new not in listed.text
    # At rest the signing secrets are sealed; the worker opens them to verify (below).
    raw = MongoClient(settings.mongo_uri)[CONTROL_DATABASE]["connector_secrets"].find_one(
        {"_id": f"{tenant}/monte-carlo"}
    )
    assert raw is not None and old not in str(raw) and new not in str(raw)
    assert all(is_sealed(s["value"]) for s in raw["webhook_secrets"])

    # The overlap: deliveries signed with either secret verify.
    eventually(worker, tenant, old, 202)
    assert deliver(worker, tenant, new) == 202
    newest = "newest-secret-" + uuid.uuid4().hex
    assert api.post(f"{route}/monte-carlo/secrets", json={"secret": newest}, headers=admin).status_code == 201
    eventually(worker, tenant, old, 401)  # retired by the second rotation
    assert deliver(worker, tenant, new) == 202
    assert deliver(worker, tenant, newest) == 202

    # The previous secret verifies until its overlap ends (listed with that end), or until it is revoked.
    listed_now = api.get(f"{route}/monte-carlo/secrets", headers=reader).json()["active"]
    assert listed_now[0]["expires_at"] is None and listed_now[1]["expires_at"] is not None
    previous_id = listed_now[1]["id"]
    problem(api.delete(f"{route}/monte-carlo/secrets/{previous_id}", headers=reader), 403)
    problem(api.delete(f"{route}/monte-carlo/secrets/ffffffff", headers=admin), 404, "secret_id")
    revoked = api.delete(f"{route}/monte-carlo/secrets/{previous_id}", headers=admin)
    assert revoked.status_code == 200, revoked.text
    assert [s["id"] for s in revoked.json()["active"]] == [listed_now[0]["id"]]
    eventually(worker, tenant, new, 401)
    assert deliver(worker, tenant, newest) == 202
    # A rotation with overlap_seconds 0 retires the previous secret at once.
    latest = "latest-secret-" + uuid.uuid4().hex
    at_once = api.post(f"{route}/monte-carlo/secrets", json={"secret": latest, "overlap_seconds": 0}, headers=admin)
    assert at_once.status_code == 201 and [s["id"] for s in at_once.json()["active"]] == [at_once.json()["id"]]
    eventually(worker, tenant, newest, 401)
    newest = latest
    assert deliver(worker, tenant, newest) == 202

    # Pause and resume through the API reach the worker.
    paused = api.post(f"{route}/monte-carlo/pause", headers=admin).json()
    assert (paused["type"], paused["connector"]["state"]) == ("webhook", "PAUSED")
    assert [(t["id"], t["state"]) for t in paused["tasks"]] == [(0, "PAUSED")]
    eventually(worker, tenant, newest, 503)
    assert api.post(f"{route}/monte-carlo/resume", headers=admin).json()["connector"]["state"] == "RUNNING"
    eventually(worker, tenant, newest, 202)
    assert api.post(f"{route}/monte-carlo/deactivate", headers=admin).json()["connector"]["state"] == "PAUSED"
    eventually(worker, tenant, newest, 503)

    # A FAILED connector is not resumed, it is activated (its error cleared).
    store = ControlStore(MongoClient(settings.mongo_uri)[CONTROL_DATABASE], stack_sealer())
    store.set_state(tenant, "monte-carlo", ConnectorState.FAILED, "task failed: mapping error")
    failed = api.get(f"{route}/monte-carlo/status", headers=reader).json()["connector"]
    assert (failed["state"], failed["error"]) == ("FAILED", "task failed: mapping error")
    problem(api.post(f"{route}/monte-carlo/resume", headers=admin), 409, "state")
    activated = api.post(f"{route}/monte-carlo/activate", headers=admin).json()["connector"]
    assert (activated["state"], activated["error"]) == ("RUNNING", None)
    eventually(worker, tenant, newest, 202)

    # Offsets: read from the offsets topic; a reset needs the connector paused.
    assert api.get(f"{route}/monte-carlo/offsets", headers=reader).json() == {"offsets": []}
    problem(api.delete(f"{route}/monte-carlo/offsets", headers=admin), 409, "state")
    api.post(f"{route}/monte-carlo/pause", headers=admin)
    assert api.delete(f"{route}/monte-carlo/offsets", headers=admin).json() == {"reset": []}

    replaced = api.put(
        f"{route}/monte-carlo",
        json={"type": "montecarlo", "config": {**MC_CONFIG, "default_instance": "b"}},
        headers=admin,
    )
    assert replaced.status_code == 200 and replaced.json()["config"]["default_instance"] == "b"
    assert replaced.json()["state"] == "PAUSED" and len(replaced.json()["webhook_secrets"]) == 1

    assert api.delete(f"{route}/monte-carlo", headers=admin).status_code == 204
    problem(api.get(f"{route}/monte-carlo", headers=admin), 404, "name")
    problem(api.delete(f"{route}/monte-carlo", headers=admin), 404, "name")

    # Every change is in the tenant's audit table, with who did it.
    rows = read(tenant_audit_path(api.app.state.ctx, tenant), AuditQuery(action="connector.", limit=100))  # type: ignore[attr-defined]
    actions = sorted({r.action for r in rows})
    assert actions == [
        "connector.activate",
        "connector.create",
        "connector.deactivate",
        "connector.delete",
        "connector.offsets.reset",
        "connector.pause",
        "connector.resume",
        "connector.secret.revoke",
        "connector.secret.rotate",
        "connector.update",
    ]
    assert {r.result for r in rows} == {"done"}


def test_offsets_of_a_source_connector(api: TestClient, settings: Settings, tenant: str) -> None:
    from control.connectors.offsets import OffsetStore

    admin = auth_headers(api, tenant=tenant, role="admin")
    route = f"/v1/tenants/{tenant}/connectors/pg"
    config = {"host": "db.internal", "user": "crawler", "password": "s3cret", "instance": "shop"}
    assert (
        api.post(
            f"/v1/tenants/{tenant}/connectors", json={"name": "pg", "type": "postgres", "config": config}, headers=admin
        ).status_code
        == 201
    )
    offsets = OffsetStore(settings)
    try:
        offsets.store(tenant, "pg", {"db=shop&schema=public": {"crawl": 3}, "db=shop&schema=sales": {"crawl": 3}})
    finally:
        offsets.close()
    got = api.get(f"{route}/offsets", headers=admin).json()["offsets"]
    assert got == [
        {"partition": "db=shop&schema=public", "offset": {"crawl": 3}},
        {"partition": "db=shop&schema=sales", "offset": {"crawl": 3}},
    ]
    api.post(f"{route}/pause", headers=admin)
    assert api.delete(f"{route}/offsets", headers=admin).json() == {
        "reset": ["db=shop&schema=public", "db=shop&schema=sales"]
    }
    assert api.get(f"{route}/offsets", headers=admin).json() == {"offsets": []}


def test_another_tenants_token_never_reaches_a_connector(api: TestClient, tenant: str) -> None:
    admin = auth_headers(api, tenant=tenant, role="admin")
    route = f"/v1/tenants/{tenant}/connectors"
    assert (
        api.post(route, json={"name": "mc", "type": "montecarlo", "config": MC_CONFIG}, headers=admin).status_code
        == 201
    )
    other = auth_headers(api, tenant=f"it-{uuid.uuid4().hex[:8]}", role="admin")
    for response in (
        api.get(route, headers=other),
        api.get(f"{route}/mc", headers=other),
        api.get(f"{route}/mc/status", headers=other),
        api.get(f"{route}/mc/secrets", headers=other),
        api.post(f"{route}/mc/pause", headers=other),
        api.post(f"{route}/mc/secrets", json={}, headers=other),
        api.put(f"{route}/mc", json={"type": "montecarlo", "config": MC_CONFIG}, headers=other),
        api.delete(f"{route}/mc", headers=other),
    ):
        problem(response, 404)
        assert "snowflake" not in response.text
    assert api.get(f"{route}/mc", headers=admin).json()["state"] == "RUNNING"


def test_source_connector_status_shows_each_task(api: TestClient, settings: Settings, tenant: str) -> None:
    admin = auth_headers(api, tenant=tenant, role="admin")
    route = f"/v1/tenants/{tenant}/connectors"
    config = {"host": "db.internal", "user": "crawler", "password": "s3cret", "instance": "shop"}
    body = {"name": "pg", "type": "postgres", "config": config, "tasks.max": 3}
    assert api.post(route, json=body, headers=admin).json()["tasks_max"] == 3
    # What a crawl writes when it splits the work (connectors.runtime: one document per task).
    store = ControlStore(MongoClient(settings.mongo_uri)[CONTROL_DATABASE], stack_sealer())
    store.tasks.assign(tenant, "pg", [{"schemas": ["a"]}, {"schemas": ["b"]}, {"schemas": ["c"]}])
    store.tasks.set_state(tenant, "pg", 0, ConnectorState.RUNNING, worker_id="host:1", last_run={"records": 7})
    # A trace as older versions stored it (frames after the first line): served without the frames.
    stored = 'OperationalError: timeout\n  File "/srv/connectors/postgres/catalog.py", line 9, in _connect'
    store.tasks.set_state(tenant, "pg", 2, ConnectorState.FAILED, trace=stored, worker_id="host:1")

    def tasks() -> list[tuple[int, str, str | None]]:
        status = api.get(f"{route}/pg/status", headers=admin).json()
        assert status["type"] == "source"
        return [(t["id"], t["state"], t["trace"]) for t in status["tasks"]]

    assert tasks() == [(0, "RUNNING", None), (1, "RUNNING", None), (2, "FAILED", "OperationalError: timeout")]
    first = api.get(f"{route}/pg/status", headers=admin).json()["tasks"][0]
    assert (first["worker_id"], first["last_run"]) == ("host:1", {"records": 7})
    api.post(f"{route}/pg/pause", headers=admin)
    assert tasks() == [(0, "PAUSED", None), (1, "PAUSED", None), (2, "FAILED", "OperationalError: timeout")]


def test_connectors_page_by_name(api: TestClient, tenant: str) -> None:
    admin = auth_headers(api, tenant=tenant, role="admin")
    route = f"/v1/tenants/{tenant}/connectors"
    for name in ("c-mc", "a-mc", "b-mc"):
        body = {"name": name, "type": "montecarlo", "config": MC_CONFIG}
        assert api.post(route, json=body, headers=admin).status_code == 201
    first = api.get(route, params={"limit": 2}, headers=admin).json()
    assert [c["name"] for c in first["items"]] == ["a-mc", "b-mc"]
    second = api.get(route, params={"limit": 2, "cursor": first["next_cursor"]}, headers=admin).json()
    assert [c["name"] for c in second["items"]] == ["c-mc"] and second["next_cursor"] is None
    problem(api.get(route, params={"cursor": "bm90LWEtY3Vyc29y"}, headers=admin), 400, "cursor")
