"""Dead letters on the real stack: a signed Monte Carlo incident for an unmapped warehouse is dead-lettered by the
worker, listed and inspected through the admin API (never its signature), refused on replay until the warehouse
map is fixed through the connectors API, then replayed: the incident event reaches Kafka once (a second replay
publishes nothing) and the tenant's MongoDB projection; every replay request is in the tenant's audit table;
another tenant can neither see nor replay the letter; ``metalake dlq`` works against the same API. And a record
the streaming job could not parse is listed from the tenant's ``_dlq`` table, and not replayed while it still fails."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from typer.testing import CliRunner

from api.app import create_app as create_api
from connectors.runtime.worker import create_app
from control.audit import AuditQuery, read, target_hash, tenant_audit_path
from metalake.events import new_event
from metalake.kafka import EventProducer, RawRecord
from metalake.s3 import lake_storage_options
from ops.cli import dlq as dlq_cli
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import CONTROL_DATABASE, PRIORITY_TOPIC, names_for
from tests._support.itest import wait_for
from tests._support.kafka_tail import mark, read_since
from tests._support.tokens import api_settings, auth_headers
from tests._support.worker_helpers import admin_api, connectors_route, create_connector, tenant_admin, worker_settings

pytestmark = pytest.mark.integration

SECRET = "mc-secret-" + uuid.uuid4().hex
WAREHOUSE = "0c0c0c0c-0000-4000-8000-" + uuid.uuid4().hex[:12]
CONFIG: dict[str, Any] = {"default_platform": "snowflake", "default_instance": "acme"}


def _signed(body: bytes) -> dict[str, str]:
    # Monte Carlo's documented algorithm (docs/connectors/montecarlo.md).
    message = urllib.parse.urlencode(json.loads(body)).encode("utf8")
    signature = hmac.new(SECRET.encode(), message, hashlib.sha512).hexdigest()
    return {"x-mcd-signature": signature, "content-type": "application/json"}


def _incident(incident_id: str) -> bytes:
    mcon = f"MCON++9a59c6f1-203a-4c72-8cd7-132db7f21b92++{WAREHOUSE}++table++analytics:prod.orders"
    return json.dumps(
        {
            "account": {"id": "9a59c6f1-203a-4c72-8cd7-132db7f21b92"},
            "action": "incident",
            "type": "open_anomaly_incident",
            "version": "v0.1",
            "payload": {
                "incident_id": incident_id,
                "group_id": "analytics:prod",
                "url": f"https://getmontecarlo.com/incidents/{incident_id}",
                "event_list": [{"event_details": "Has 42 rows", "table_name": "orders", "mcon": mcon}],
            },
        }
    ).encode()


def test_an_unmapped_warehouse_is_replayed_once_after_the_map_is_fixed(
    settings: Settings, stack: StackManager, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    started = datetime.now(UTC)
    other = f"{tenant}-other"
    with admin_api(settings, plugins={}) as api:
        admin, stranger = tenant_admin(api, tenant), tenant_admin(api, other)
        create_connector(api, admin, tenant, "monte-carlo", type="montecarlo", config=CONFIG)
        secrets = connectors_route(tenant, "monte-carlo") + "/secrets"
        assert api.post(secrets, json={"secret": SECRET}, headers=admin).status_code == 201

        incident_id = str(uuid.uuid4())
        body = _incident(incident_id)
        with TestClient(create_app(worker_settings(settings))) as worker:
            sent = worker.post(f"/webhooks/monte-carlo/{tenant}", content=body, headers=_signed(body))
        assert sent.status_code == 202 and sent.json()["status"] == "dead_lettered", sent.text

        route = f"/v1/tenants/{tenant}/dead-letters"
        listed = api.get(route, params={"connector": "monte-carlo", "since": started.isoformat()}, headers=admin)
        assert listed.status_code == 200, listed.text
        [item] = listed.json()["items"]
        assert (item["stage"], item["error_class"], item["plugin"], item["replay"]) == (
            "mapping",
            "InvalidPayload",
            "montecarlo",
            None,
        )
        assert item["field"].endswith("mcon") and WAREHOUSE not in item["reason"]
        letter = item["id"]

        shown = api.get(f"{route}/{letter}", headers=admin)
        assert shown.status_code == 200
        view = shown.json()
        assert view["payload"]["shown"] and view["payload"]["value"]["payload"]["incident_id"] == incident_id
        assert view["headers"] == {"content-type": "application/json"}
        assert SECRET not in shown.text and _signed(body)["x-mcd-signature"] not in shown.text

        # Tenant isolation: the other tenant's admin sees no such letter, on its own path or on ours.
        for method, path in (
            ("GET", f"/v1/tenants/{other}/dead-letters/{letter}"),
            ("POST", f"/v1/tenants/{other}/dead-letters/{letter}/replay"),
        ):
            assert api.request(method, path, headers=stranger).status_code == 404
        assert letter not in api.get(f"/v1/tenants/{other}/dead-letters", headers=stranger).text
        assert api.get(f"{route}/{letter}", headers=stranger).status_code in (403, 404)
        assert api.post(f"{route}/{letter}/replay", headers=stranger).status_code in (403, 404)

        # Before the fix: refused, naming the field; recorded, and the letter may be tried again.
        refused = api.post(f"{route}/{letter}/replay", headers=admin)
        assert refused.status_code == 409 and refused.json()["field"].endswith("mcon"), refused.text

        fixed = {**CONFIG, "warehouses": {WAREHOUSE: {"platform": "bigquery", "instance": "analytics"}}}
        updated = api.put(
            connectors_route(tenant, "monte-carlo"), json={"type": "montecarlo", "config": fixed}, headers=admin
        )
        assert updated.status_code == 200, updated.text

        marks = mark(settings, PRIORITY_TOPIC)
        replayed = api.post(f"{route}/{letter}/replay", headers=admin)
        assert replayed.status_code == 200, replayed.text
        assert (replayed.json()["outcome"], replayed.json()["published"]) == ("replayed", 1)
        again = api.post(f"{route}/{letter}/replay", headers=admin)
        assert (again.json()["outcome"], again.json()["published"]) == ("already_replayed", 0)
        [event_id] = replayed.json()["replay"]["events"]

        # metalake dlq against the same API: the letter shows as replayed; replaying it again publishes nothing.
        token = admin["Authorization"].removeprefix("Bearer ")
        env = {"METALAKE_TOKEN": token}
        original_make_http = dlq_cli.make_http
        dlq_cli.make_http = lambda base: api  # type: ignore[assignment]  # the API app in process (an httpx.Client)
        try:
            listed_cli = CliRunner().invoke(dlq_cli.app, ["list", "-t", tenant, "--api", "http://testserver"], env=env)
            replay_cli = CliRunner().invoke(
                dlq_cli.app, ["replay", "-t", tenant, letter, "--api", "http://testserver"], env=env
            )
        finally:
            dlq_cli.make_http = original_make_http
        assert listed_cli.exit_code == 0 and f"{letter}\t" in listed_cli.stdout and "\treplayed\t" in listed_cli.stdout
        assert replay_cli.exit_code == 0 and f"[1/1] {letter}: already_replayed (0 published)" in replay_cli.stderr

    urn = "urn:metalake:bigquery:analytics/analytics/prod/orders"
    records = read_since(
        settings, PRIORITY_TOPIC, marks, lambda r: r.headers.get("ce_id") == event_id.encode(), expect=1
    )
    assert len(records) == 1  # three replay requests, one publish
    assert records[0].headers["ce_subject"] == urn.encode()

    projected = mongo[names_for(tenant, settings.lake_root).mongo_database]["incidents"]
    doc = wait_for("the replayed incident in MongoDB", lambda: projected.find_one({"_id": f"{incident_id}|{urn}"}))
    assert doc["status"] == "opened"

    path = tenant_audit_path(mongo[CONTROL_DATABASE], settings.lake_root, tenant)
    query = AuditQuery(action="dead_letter.replay", target_hash=target_hash(letter))
    rows = read(path, query, lake_storage_options(settings))
    assert sorted(r.result for r in rows) == ["done", "duplicate", "duplicate", "refused"]
    assert {r.actor for r in rows if r.result == "done"} and all(r.actor for r in rows)


def test_a_stream_dlq_row_is_listed_and_its_replay_refused_while_it_does_not_parse(
    settings: Settings, stack: StackManager, tenant: str
) -> None:
    # An asset event without its required `version`, as a careless producer sends it: the job's _dlq keeps it.
    urn = f"urn:metalake:postgres:{tenant}/shop/public/orders"
    event = new_event(
        "io.metalake.asset.upserted.v1", tenant, {"urn": urn, "version": 1, "kind": "table", "name": "o"}, source="/it"
    )
    value = json.dumps({"urn": urn, "kind": "table", "name": "o"}).encode()
    with EventProducer(settings) as producer:
        producer.publish_raw([RawRecord(PRIORITY_TOPIC, event.id, event.key, value, event.headers())])
    with TestClient(create_api(api_settings(settings))) as api:
        admin = auth_headers(api, tenant=tenant, role="admin")
        route = f"/v1/tenants/{tenant}/dead-letters"

        def listed() -> list[dict[str, Any]] | None:
            items: list[dict[str, Any]] = api.get(route, params={"stage": "stream"}, headers=admin).json()["items"]
            return items or None

        [item] = wait_for("the record in the tenant's _dlq, listed", listed, timeout_s=180)
        assert (item["medium"], item["stage"], item["field"]) == ("stream", "stream", "data/(root)")
        assert item["id"].startswith("stream-priority-") and "version" in item["reason"]
        shown = api.get(f"{route}/{item['id']}", headers=admin).json()
        assert shown["headers"]["ce_id"] == event.id and shown["payload"]["value"] == json.loads(value)
        refused = api.post(f"{route}/{item['id']}/replay", headers=admin)
        assert refused.status_code == 409 and refused.json()["field"] == "data/(root)", refused.text
        other = auth_headers(api, tenant=f"{tenant}-other", role="admin")
        assert api.get(f"/v1/tenants/{tenant}-other/dead-letters/{item['id']}", headers=other).status_code == 404
