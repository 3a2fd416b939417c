"""The ingest API on the real stack: per-event results, only the valid events in Kafka, write keys."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from kafka_tail import mark, of_tenant, read_since
from pymongo import MongoClient
from worker_helpers import ADMIN

from metalake.settings import Settings
from metalake.urn import asset_urn
from tenants.naming import BULK_TOPIC, CONTROL_DATABASE, PRIORITY_TOPIC

pytestmark = pytest.mark.integration


def _event(tenant: str, i: int, kind: str = "table") -> dict[str, Any]:
    path = ("db", "public", "orders", f"c{i}") if kind == "column" else ("db", "public", f"t{i}")
    return {
        "specversion": "1.0",
        "id": f"ingest-{i}",
        "source": "/producers/it",
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": tenant,
        "data": {"urn": asset_urn("pg", "it", *path), "version": i, "kind": kind, "name": f"x{i}"},
    }


def _write_key(worker: TestClient, tenant: str) -> str:
    response = worker.post(f"/tenants/{tenant}/write-keys", headers=ADMIN)
    assert response.status_code == 201
    key: str = response.json()["key"]
    return key


def test_mixed_array_publishes_only_the_valid_events(
    worker: TestClient, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    key = _write_key(worker, tenant)
    invalid = _event(tenant, 2)
    invalid["data"]["kind"] = "galaxy"
    foreign = _event("someone-else", 3)
    body = [_event(tenant, 1), invalid, foreign, _event(tenant, 4, kind="column")]
    marks = mark(settings, PRIORITY_TOPIC), mark(settings, BULK_TOPIC)
    response = worker.post("/v1/events", json=body, headers={"Authorization": f"Bearer {key}"})
    assert response.status_code == 200, response.text
    results = response.json()["results"]
    assert [r["status"] for r in results] == ["accepted", "rejected", "rejected", "accepted"]
    assert results[1]["error"]["field"] == "data/kind"
    assert results[2]["error"]["field"] == "tenantid"
    priority = read_since(settings, PRIORITY_TOPIC, marks[0], of_tenant(tenant), expect=1)
    bulk = read_since(settings, BULK_TOPIC, marks[1], of_tenant(tenant), expect=1)
    assert [r.headers["ce_id"] for r in priority] == [b"ingest-1"]
    assert [r.headers["ce_id"] for r in bulk] == [b"ingest-4"]
    # Only the hash of the key is stored.
    stored = list(mongo[CONTROL_DATABASE]["connector_secrets"].find({"tenant": tenant}))
    assert stored and key not in json.dumps(stored, default=str)
    assert key.split("_", 2)[2] not in json.dumps(stored, default=str)


def test_ndjson_with_the_header_key(worker: TestClient, settings: Settings, tenant: str) -> None:
    key = _write_key(worker, tenant)
    marks = mark(settings, PRIORITY_TOPIC)
    body = "\n".join(json.dumps(_event(tenant, i)) for i in range(3)) + "\n"
    response = worker.post(
        "/v1/events", content=body, headers={"X-Metalake-Write-Key": key, "Content-Type": "application/x-ndjson"}
    )
    assert response.json()["accepted"] == 3
    assert len(read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=3)) == 3


def test_wrong_or_revoked_write_key_is_401(worker: TestClient, tenant: str) -> None:
    key = _write_key(worker, tenant)
    key_id = key.split("_", 2)[1]
    wrong = key[:-4] + ("aaaa" if not key.endswith("aaaa") else "bbbb")
    assert (
        worker.post("/v1/events", json=_event(tenant, 1), headers={"Authorization": f"Bearer {wrong}"}).status_code
        == 401
    )
    assert worker.delete(f"/tenants/{tenant}/write-keys/{key_id}", headers=ADMIN).status_code == 204
    revoked = worker.post("/v1/events", json=_event(tenant, 1), headers={"Authorization": f"Bearer {key}"})
    assert revoked.status_code == 401
    assert revoked.headers["content-type"] == "application/problem+json"
