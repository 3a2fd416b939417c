"""With Kafka stopped the webhook answers 503 + Retry-After and records nothing; the resend publishes exactly once.

The only test that stops a stack service: Kafka is always started again in ``finally``.
"""

from __future__ import annotations

import time

import pytest
from fastapi.testclient import TestClient

from connectors.runtime.worker import create_app
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import PRIORITY_TOPIC
from tests._support.kafka_tail import mark, of_tenant, read_since
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import admin_api, configure_hook, post_signed, worker_settings

pytestmark = pytest.mark.integration

SECRET = "it-kafka-down-secret-0123456789"


def test_kafka_down_then_resend_publishes_exactly_once(settings: Settings, stack: StackManager, tenant: str) -> None:
    app = create_app(worker_settings(settings, publish_timeout_ms=3000), plugins=PLUGINS)
    payload = {"delivery": "during-outage", "tables": [{"name": "orders", "version": 1}]}
    with admin_api(settings) as api:
        configure_hook(api, tenant, SECRET)
    with TestClient(app) as worker:
        marks = mark(settings, PRIORITY_TOPIC)
        try:
            stack.down(["kafka"])
            response = post_signed(worker, tenant, SECRET, payload)
            assert response.status_code == 503, response.text
            assert response.headers["retry-after"] == "7"
            assert response.headers["content-type"] == "application/problem+json"
        finally:
            stack.up(["kafka"])
        # The sender retries after Retry-After; the producer may need a moment to reconnect to the new broker.
        deadline = time.monotonic() + 60
        while True:
            resent = post_signed(worker, tenant, SECRET, payload)
            if resent.status_code != 503 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert resent.status_code == 202, resent.text
        assert post_signed(worker, tenant, SECRET, payload).json() == {"status": "duplicate"}
    records = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=1, settle_s=3)
    assert len(records) == 1
