"""End to end with the real ``montecarlo`` plugin (from its entry point), set up through the admin API: a payload
signed as Monte Carlo signs it -> the worker's webhook -> Kafka -> the streaming job -> the tenant's Delta ``events``
table, read through Trino."""

from __future__ import annotations

import hashlib
import hmac
import json
import urllib.parse
import uuid
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from connectors.runtime.worker import create_app
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import names_for
from tenants.trino_schemas import trino_schema
from tests._support.itest import trino_rows, wait_for
from tests._support.worker_helpers import admin_api, connectors_route, create_connector, tenant_admin, worker_settings

pytestmark = pytest.mark.integration

SECRET = "mc-secret-" + uuid.uuid4().hex


def _mc_signature(secret: str, body: bytes) -> str:
    # Exactly Monte Carlo's reference algorithm (docs/connectors/montecarlo.md), written out here on purpose rather than
    # imported from the plugin, so the test checks the plugin against the documented algorithm.
    message = urllib.parse.urlencode(json.loads(body)).encode("utf8")
    return hmac.new(secret.encode(), message, hashlib.sha512).hexdigest()


def test_signed_incident_is_visible_in_delta_and_mongodb(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    with admin_api(settings, plugins={}) as api:
        admin = tenant_admin(api, tenant)
        config = {"default_platform": "snowflake", "default_instance": "acme"}
        create_connector(api, admin, tenant, "monte-carlo", type="montecarlo", config=config)
        secrets = connectors_route(tenant, "monte-carlo") + "/secrets"
        assert api.post(secrets, json={"secret": SECRET}, headers=admin).status_code == 201
    with TestClient(create_app(worker_settings(settings))) as worker:
        incident_id = str(uuid.uuid4())
        body = json.dumps(
            {
                "account": {"id": "9a59c6f1-203a-4c72-8cd7-132db7f21b92"},
                "action": "incident",
                "type": "open_anomaly_incident",
                "version": "v0.1",
                "payload": {
                    "incident_id": incident_id,
                    "group_id": "zeus:ares",
                    "url": f"https://getmontecarlo.com/incidents/{incident_id}",
                    "event_list": [{"event_details": "Has 42 rows vs. 101 expected", "table_name": "artemis"}],
                },
            }
        ).encode()
        headers = {"x-mcd-signature": _mc_signature(SECRET, body), "content-type": "application/json"}
        response = worker.post(f"/webhooks/monte-carlo/{tenant}", content=body, headers=headers)
        assert response.status_code == 202, response.text
        assert response.json()["status"] == "accepted" and len(response.json()["events"]) == 1
        assert worker.post(f"/webhooks/monte-carlo/{tenant}", content=body, headers=headers).status_code == 200

        tampered = worker.post(f"/webhooks/monte-carlo/{tenant}", content=body.replace(b"42", b"43"), headers=headers)
        assert tampered.status_code == 401

    schema = trino_schema(settings, tenant)
    rows = wait_for(
        "the incident in the tenant's Delta events table (through Trino)",
        lambda: trino_rows(trino_cursor, f'SELECT event_type, subject FROM lake."{schema}".events'),
        timeout_s=300,  # the job may be catching up on a backlog after a restart
    )
    assert rows == [("com.montecarlodata.incident.opened.v1", "urn:metalake:snowflake:acme/zeus/ares/artemis")]
    # The incident's current state: the Delta incidents table and the MongoDB projection the API reads.
    urn = "urn:metalake:snowflake:acme/zeus/ares/artemis"
    incidents = wait_for(
        "the incident in the tenant's Delta incidents table",
        lambda: trino_rows(trino_cursor, f'SELECT incident_id, urn, status, deleted FROM lake."{schema}".incidents'),
    )
    assert incidents == [(incident_id, urn, "opened", False)]
    projected = mongo[names_for(tenant, settings.lake_root).mongo_database]["incidents"]
    doc = wait_for("the incident in MongoDB", lambda: projected.find_one({"_id": f"{incident_id}|{urn}"}))
    assert (doc["status"], doc["url"], doc["deleted"]) == (
        "opened",
        f"https://getmontecarlo.com/incidents/{incident_id}",
        False,
    )
