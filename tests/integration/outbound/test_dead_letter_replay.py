"""An outbound dead letter replayed on the real stack: a change whose webhook subscription points where the SSRF
guard refuses is dead-lettered by the outbound runtime (a process); once the subscription points at a real receiver,
the admin API's replay hands it back to the runtime, which delivers it once (a second replay publishes nothing)."""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent
from metalake.kafka import EventProducer
from ops.settings import Settings
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE
from tests._support.itest import wait_for
from tests._support.kafka_tail import mark, read_since
from tests._support.outbound_helpers import WEBHOOK_SECRET, classification_event, webhook_sub
from tests._support.outbound_runtime import DLQ, MAIN_TOPICS, RETRY, RuntimeProcess, start_groups_at_end
from tests._support.sealing import stack_sealer
from tests._support.tokens import api_settings, auth_headers
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

EMAIL = "urn:metalake:postgres:prod/shop/public/customers/email"
FAST = {
    "ssrf_allow": ["127.0.0.0/8"],
    "subscriptions_ttl_s": 0.5,
    "short_attempts": 1,
    "retry_initial_s": 1,
    "retry_max_s": 2,
    "retry_topic_max_attempts": 3,
    "http_timeout_s": 3,
    "poll_timeout_s": 0.2,
    "session_timeout_ms": 6000,
}


@pytest.fixture
def runtime(settings: Settings, tmp_path: Path) -> Iterator[RuntimeProcess]:
    run = secrets.token_hex(4)
    groups = {"group_id": f"it-outbound-{run}", "retry_group_id": f"it-outbound-retry-{run}"}
    start_groups_at_end(settings, {groups["group_id"]: MAIN_TOPICS, groups["retry_group_id"]: RETRY})
    proc = RuntimeProcess(settings, tmp_path / "outbound.log", **{**FAST, **groups}).start()
    yield proc
    proc.stop()


def _publish(settings: Settings, event: CloudEvent) -> None:
    with EventProducer(settings) as producer:
        producer.publish([event], lambda _: CHANGES_TOPIC)


def test_an_outbound_letter_is_delivered_once_after_its_subscription_is_fixed(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, runtime: RuntimeProcess
) -> None:
    hook = WebhookServer(WEBHOOK_SECRET).start()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        webhook_sub(store, tenant, "https://169.254.169.254/latest/meta-data", name="ops")
        dlq_mark = mark(settings, DLQ)
        change = classification_event(tenant, EMAIL, "PII")
        _publish(settings, change)
        read_since(settings, DLQ, dlq_mark, lambda r: r.headers.get("ce_id") == change.id.encode(), expect=1)

        # The cause fixed: the subscription now points at a receiver the guard lets through.
        store.delete(tenant, "ops")
        webhook_sub(store, tenant, f"{hook.url}/in", name="ops")

        with TestClient(create_app(api_settings(settings))) as api:
            admin = auth_headers(api, tenant=tenant, role="admin")
            route = f"/v1/tenants/{tenant}/dead-letters"
            [item] = api.get(route, params={"stage": "outbound"}, headers=admin).json()["items"]
            assert (item["subscription"], item["error_class"], item["plugin"]) == (
                "ops",
                "PermanentDelivery",
                "webhook",
            )
            shown = api.get(f"{route}/{item['id']}", headers=admin).json()
            assert shown["headers"]["ce_id"] == change.id and shown["payload"]["shown"]

            retry_mark = mark(settings, RETRY)
            replayed = api.post(f"{route}/{item['id']}/replay", headers=admin)
            assert replayed.status_code == 200 and replayed.json()["outcome"] == "replayed", replayed.text
            again = api.post(f"{route}/{item['id']}/replay", headers=admin)
            assert again.json()["outcome"] == "already_replayed"

        wait_for("the replayed change delivered to the fixed webhook", lambda: hook.verified or None, timeout_s=60)
        time.sleep(2)  # a second delivery, if any, would arrive now
        assert len(hook.verified) == 1 and change.id in json.dumps(hook.verified[0]["body"])
        retried = read_since(
            settings, RETRY, retry_mark, lambda r: r.headers.get("ce_id") == change.id.encode(), expect=1
        )
        assert len(retried) == 1 and retried[0].headers["outbound.subscription"] == b"ops"
        assert runtime.alive(), runtime.log()
    finally:
        hook.stop()
