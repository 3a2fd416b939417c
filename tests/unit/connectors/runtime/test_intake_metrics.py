"""The connector worker's intake in metalake_events_total and metalake_intake_request_seconds: accepted events once
Kafka confirmed them, a refused request by its reason, dead letters by plugin and stage; no tenant label."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from connectors.runtime.errors import _default_counter
from control.connectors.records import ConnectorRecord
from metalake.telemetry.exposition import install_meter_provider, render
from tests._support.runtime_fakes import World
from tests._support.runtime_plugins import sign
from tests._support.scrape import sample

SECRET = "s3cret-s3cret-s3cret"
URL = "/webhooks/test-hook/acme"


@pytest.fixture(autouse=True)
def _setup(world: World) -> None:
    install_meter_provider()
    world.store.add(ConnectorRecord("acme", "hook", "testhook", {}), SECRET)


def _events(source: str, outcome: str, reason: str) -> float:
    labels = {"source": source, "outcome": outcome, "reason": reason}
    return sample(render().decode(), "metalake_events_total", labels)


def _requests() -> float:
    return sample(render().decode(), "metalake_intake_request_seconds_count", {"source": "webhook"})


def _post(client: TestClient, body: bytes, secret: str) -> int:
    return client.post(URL, content=body, headers={"x-test-signature": sign(secret, body)}).status_code


def test_a_webhook_counts_accepted_events_and_refused_requests(client: TestClient) -> None:
    accepted, refused, requests = (
        _events("webhook", "accepted", "none"),
        _events("webhook", "refused", "unauthenticated"),
        _requests(),
    )
    body = json.dumps({"delivery": "m1", "tables": [{"name": "orders"}, {"name": "items"}]}).encode()
    assert _post(client, body, SECRET) == 202
    assert _post(client, body, "wrong-secret-wrong") == 401
    assert _events("webhook", "accepted", "none") - accepted == 2
    assert _events("webhook", "refused", "unauthenticated") - refused == 1
    assert _requests() - requests == 2
    assert "acme" not in render().decode()


def test_the_default_dead_letter_counter_is_events_total_by_plugin_and_stage() -> None:
    before = _events("testhook", "dead_lettered", "mapping")
    _default_counter().add(1, {"plugin": "testhook", "stage": "mapping"})
    assert _events("testhook", "dead_lettered", "mapping") - before == 1
