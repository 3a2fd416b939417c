"""The webhook receiver on the real stack: Kafka records with their headers and keys, the DLQ, dedup, and connectors
managed through the admin API reaching the worker."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from connectors.runtime.worker import create_app
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, PRIORITY_TOPIC, dlq_topic
from tenants.registry import TenantRegistry, TenantState
from tests._support.kafka_tail import mark, of_tenant, read_since
from tests._support.runtime_plugins import PLUGINS, sign
from tests._support.tokens import auth_headers
from tests._support.worker_helpers import configure_hook, connectors_route, post_signed, worker_settings

pytestmark = pytest.mark.integration

SECRET = "it-webhook-secret-0123456789"


def test_signed_delivery_lands_in_kafka_with_headers_and_key(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str
) -> None:
    configure_hook(api, tenant, SECRET)
    marks = mark(settings, PRIORITY_TOPIC)
    trace_id = "4bf92f3577b34da6a3ce929d0e0e4736"
    payload = {"delivery": "d1", "tables": [{"name": "orders", "version": 5}]}
    response = post_signed(worker, tenant, SECRET, payload, traceparent=f"00-{trace_id}-00f067aa0ba902b7-01")
    assert response.status_code == 202, response.text
    [event_id] = response.json()["events"]
    [record] = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=1)
    urn = "urn:metalake:test:wh/db/public/orders"
    assert record.key == f"{tenant}:{urn}".encode()
    assert record.headers["ce_id"] == event_id.encode()
    assert record.headers["ce_type"] == b"io.metalake.asset.upserted.v1"
    assert record.headers["ce_source"] == f"/tenants/{tenant}/connectors/hook".encode()
    assert record.headers["ce_subject"] == urn.encode()
    assert record.headers["ce_partitionkey"] == record.key
    assert record.headers["ce_traceparent"].split(b"-")[1] == trace_id.encode()  # one trace from the HTTP request
    assert json.loads(record.value or b"") == {"urn": urn, "version": 5, "kind": "table", "name": "orders"}


def test_redelivery_publishes_once(worker: TestClient, api: TestClient, settings: Settings, tenant: str) -> None:
    configure_hook(api, tenant, SECRET)
    marks = mark(settings, PRIORITY_TOPIC)
    payload = {"delivery": "same", "tables": [{"name": "orders"}]}
    assert post_signed(worker, tenant, SECRET, payload).status_code == 202
    again = post_signed(worker, tenant, SECRET, payload)
    assert again.status_code == 200 and again.json() == {"status": "duplicate"}
    assert len(read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=1)) == 1


def test_bad_signature_is_401_and_publishes_nothing(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str
) -> None:
    configure_hook(api, tenant, SECRET)
    body = json.dumps({"delivery": "d1", "tables": [{"name": "orders"}]}).encode()
    response = worker.post(
        f"/webhooks/test-hook/{tenant}", content=body, headers={"x-test-signature": sign("wrong-secret", body)}
    )
    assert response.status_code == 401
    assert response.headers["content-type"] == "application/problem+json"
    assert SECRET not in response.text


def test_oversized_body_is_413(worker: TestClient, api: TestClient, tenant: str) -> None:
    configure_hook(api, tenant, SECRET)
    tables = [{"name": f"table_{i:06d}"} for i in range(5000)]
    response = post_signed(worker, tenant, SECRET, {"delivery": "big", "tables": tables})
    assert response.status_code == 413
    assert response.json()["type"] == "/problems/body-too-large"


def test_unmappable_goes_to_the_dlq_with_202(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str
) -> None:
    configure_hook(api, tenant, SECRET)
    marks = mark(settings, dlq_topic("connectors"))
    payload = {"delivery": "bad", "tables": "not-a-list"}
    response = post_signed(worker, tenant, SECRET, payload)
    assert response.status_code == 202 and response.json()["status"] == "dead_lettered"
    [record] = read_since(settings, dlq_topic("connectors"), marks, of_tenant(tenant), expect=1)
    assert record.value == json.dumps(payload).encode()
    assert record.key == f"{tenant}:hook".encode()
    assert record.headers["error.class"] == b"InvalidPayload"
    assert record.headers["stage"] == b"mapping"
    assert record.headers["plugin"] == b"testhook"
    assert record.headers["connector"] == b"hook"
    assert record.headers["origin"] == f"webhook:/webhooks/test-hook/{tenant}".encode()
    assert record.headers["content-type"] == b"application/json"


def test_a_connector_managed_through_the_admin_api_is_what_the_worker_serves(
    worker: TestClient, api: TestClient, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    admin = configure_hook(api, tenant, SECRET, transforms=[{"type": "filter", "pattern": "*.lineage.*"}])
    route = connectors_route(tenant, "hook")
    listed = api.get(connectors_route(tenant), headers=admin).json()["items"]
    assert [(c["name"], c["state"]) for c in listed] == [("hook", "RUNNING")]
    # Operators list every tenant's connectors (or one tenant's); a tenant's token may not.
    platform = auth_headers(api, platform_admin=True)
    everyone = api.get("/v1/connectors", params={"tenant": tenant}, headers=platform)
    assert [(c["tenant"], c["name"]) for c in everyone.json()["items"]] == [(tenant, "hook")]
    assert api.get("/v1/connectors", headers=admin).status_code == 403
    config = api.get(route, headers=admin)
    assert config.status_code == 200
    assert config.json()["transforms"] == [{"type": "filter", "pattern": "*.lineage.*", "mode": "drop"}]
    assert len(config.json()["webhook_secrets"]) == 1
    assert SECRET not in config.text

    rotated = api.post(f"{route}/secrets", json={}, headers=admin)
    assert rotated.status_code == 201 and len(rotated.json()["active"]) == 2
    new_secret = rotated.json()["secret"]  # generated: shown this once
    assert post_signed(worker, tenant, new_secret, {"delivery": "n", "tables": []}).status_code == 202
    assert post_signed(worker, tenant, SECRET, {"delivery": "o", "tables": []}).status_code == 202
    third = api.post(f"{route}/secrets", json={"secret": "a-third-secret-abcdef"}, headers=admin)
    assert len(third.json()["active"]) == 2
    assert post_signed(worker, tenant, SECRET, {"delivery": "p", "tables": []}).status_code == 401  # retired

    paused = api.post(f"{route}/pause", headers=admin)
    assert paused.status_code == 200
    status = paused.json()
    assert status["connector"]["state"] == "PAUSED" and status["type"] == "webhook"
    assert [(t["id"], t["state"]) for t in status["tasks"]] == [(0, "PAUSED")]  # one task: the delivery handler
    refused = post_signed(worker, tenant, new_secret, {"delivery": "q", "tables": []})
    assert refused.status_code == 503 and refused.headers["retry-after"] == "7"
    assert api.post(f"{route}/resume", headers=admin).json()["connector"]["state"] == "RUNNING"
    assert api.post(f"{route}/activate", headers=admin).json()["connector"]["state"] == "RUNNING"
    assert post_signed(worker, tenant, new_secret, {"delivery": "r", "tables": []}).status_code == 202
    many = api.post(connectors_route(tenant), json={"name": "other", "type": "testhook", "tasks_max": 2}, headers=admin)
    assert many.status_code == 422 and many.json()["field"] == "tasks_max"

    bad = {"name": "other", "type": "testhook", "config": {"nope": 1}}
    bad_answer = api.post(connectors_route(tenant), json=bad, headers=admin)
    assert bad_answer.status_code == 422 and bad_answer.json()["field"] == "config/nope"
    unknown = api.post(connectors_route(tenant), json={"name": "other", "type": "a.b:C"}, headers=admin)
    assert unknown.status_code == 422 and unknown.json()["field"] == "type"

    # Secrets live in their own collection; the connectors collection never holds one.
    doc = mongo[CONTROL_DATABASE]["connectors"].find_one({"_id": f"{tenant}/hook"})
    assert doc is not None and SECRET not in json.dumps(doc, default=str)
    assert api.delete(route, headers=admin).status_code == 204
    assert api.get(route, headers=admin).status_code == 404
    assert post_signed(worker, tenant, new_secret, {"delivery": "s", "tables": []}).status_code == 404


def test_a_change_through_the_admin_api_is_seen_within_the_lookup_ttl(
    worker: TestClient, api: TestClient, settings: Settings, stack: StackManager, tenant: str
) -> None:
    # A worker that caches the connector and its secrets for 1 s learns of a pause made through the admin API (another
    # process) when its entry expires; the module's worker, which caches nothing, sees it at once.
    cached_app = create_app(worker_settings(settings, lookup_cache_ttl_s=1.0), plugins=PLUGINS)
    admin = configure_hook(api, tenant, SECRET)
    route = connectors_route(tenant, "hook")
    with TestClient(cached_app) as cached:
        accepted = post_signed(cached, tenant, SECRET, {"delivery": "x1", "tables": []})
        assert accepted.status_code == 202, accepted.text
        assert api.post(f"{route}/pause", headers=admin).status_code == 200
        assert post_signed(worker, tenant, SECRET, {"delivery": "x2", "tables": []}).status_code == 503
        time.sleep(1.2)
        assert post_signed(cached, tenant, SECRET, {"delivery": "x3", "tables": []}).status_code == 503
        assert api.post(f"{route}/resume", headers=admin).status_code == 200
        time.sleep(1.2)
        assert post_signed(cached, tenant, SECRET, {"delivery": "x4", "tables": []}).status_code == 202


def test_a_suspended_or_deleting_tenant_gets_403_after_the_signature_check(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    configure_hook(api, tenant, SECRET)
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    directory = worker.app.state.runtime.gate.tenants  # type: ignore[attr-defined]
    try:
        for i, state in enumerate((TenantState.SUSPENDED, TenantState.DELETING)):
            registry.set_state(tenant, state)
            directory.invalidate(tenant)
            marks = mark(settings, PRIORITY_TOPIC)
            refused = post_signed(worker, tenant, SECRET, {"delivery": f"s{i}", "tables": [{"name": "orders"}]})
            assert refused.status_code == 403, (state, refused.text)
            assert refused.headers["content-type"] == "application/problem+json"
            assert refused.json()["type"].endswith("/tenant-suspended")
            # An unsigned caller learns nothing of the tenant's state: the signature is checked first.
            body = json.dumps({"delivery": f"u{i}", "tables": []}).encode()
            unsigned = worker.post(
                f"/webhooks/test-hook/{tenant}", content=body, headers={"x-test-signature": sign("wrong", body)}
            )
            assert unsigned.status_code == 401
        registry.set_state(tenant, TenantState.ACTIVE)
        directory.invalidate(tenant)
        # The refused delivery was not recorded as seen: once resumed, the sender's resend is accepted.
        resent = post_signed(worker, tenant, SECRET, {"delivery": "s0", "tables": [{"name": "orders"}]})
        assert resent.status_code == 202, resent.text
        [record] = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=1)
        assert record.headers["ce_id"] == resent.json()["events"][0].encode()
    finally:
        registry.delete(tenant)
        directory.invalidate(tenant)
