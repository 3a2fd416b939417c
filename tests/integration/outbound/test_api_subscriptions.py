"""Subscriptions through the admin API with real tokens: CRUD, write-only secrets, webhook key rotation, and the
test send reaching the local Slack and webhook servers through Kafka and an outbound runtime process."""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from httpx import Response
from pymongo import MongoClient

from api.app import create_app
from control.auth.settings import ApiSettings
from control.subscriptions.store import SubscriptionStore
from metalake.sealing import is_sealed
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.outbound.destinations.webhook.signing import verify
from tenants.naming import CONTROL_DATABASE
from tests._support.outbound_helpers import SLACK_TOKEN, WEBHOOK_SECRET, outbound_settings
from tests._support.outbound_runtime import MAIN_TOPICS, RETRY, RuntimeProcess, start_groups_at_end
from tests._support.sealing import stack_sealer
from tests._support.slack_server import SlackServer
from tests._support.tokens import auth_headers
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

NEW_SECRET = "rotated-signing-secret-0123456789"
# Long enough for the runtime's answer on a loaded machine: these tests want the synchronous (200/502) shape.
WAIT_S = 30.0


def _app(settings: Settings, client: MongoClient[dict[str, Any]], wait_s: float) -> TestClient:
    api_settings = ApiSettings(**{**settings.api.model_dump(), "subscription_test_wait_s": wait_s})
    return TestClient(create_app(settings.model_copy(update={"api": api_settings}), mongo=client))


@pytest.fixture
def mongo_client(settings: Settings, stack: StackManager) -> Iterator[MongoClient[dict[str, Any]]]:
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    yield client
    client.close()


@pytest.fixture
def outbound(settings: Settings, stack: StackManager, tmp_path: Path) -> Iterator[RuntimeProcess]:
    """The outbound runtime that delivers the test sends, in fresh consumer groups at the topics' ends."""
    run = secrets.token_hex(4)
    groups = {"group_id": f"it-outbound-api-{run}", "retry_group_id": f"it-outbound-api-retry-{run}"}
    start_groups_at_end(settings, {groups["group_id"]: MAIN_TOPICS, groups["retry_group_id"]: RETRY})
    proc = RuntimeProcess(
        settings,
        tmp_path / "outbound.log",
        allow_base_url_override=True,
        ssrf_allow=["127.0.0.0/8"],
        poll_timeout_s=0.2,
        http_timeout_s=5,
        **groups,
    ).start()
    yield proc
    proc.stop()


@pytest.fixture
def api(
    settings: Settings, mongo_client: MongoClient[dict[str, Any]], outbound: RuntimeProcess
) -> Iterator[TestClient]:
    with _app(outbound_settings(settings), mongo_client, WAIT_S) as test_client:
        yield test_client


def _test_send(api: TestClient, url: str, headers: dict[str, str], runtime: RuntimeProcess) -> Response:
    sent = api.post(url, headers=headers)
    assert sent.status_code != 202, f"no outcome within {WAIT_S}s; runtime log:\n{runtime.log()}"
    return sent


def test_crud_secrets_stay_write_only_and_test_send(api: TestClient, outbound: RuntimeProcess, tenant: str) -> None:
    slack = SlackServer(SLACK_TOKEN).start()
    try:
        admin = auth_headers(api, tenant=tenant, role="admin")
        base = f"/v1/tenants/{tenant}/subscriptions"
        body = {
            "name": "pii-alerts",
            "destination": "slack",
            "config": {"channel": "C0123", "base_url": slack.base_url},
            "secrets": {"token": SLACK_TOKEN},
            "filters": {"event_types": ["classification.*"], "tags": ["PII"]},
        }
        created = api.post(base, json=body, headers=admin)
        assert created.status_code == 201, created.text
        assert created.headers["Location"] == f"{base}/pii-alerts"
        view = created.json()
        assert view["secret_fields"] == ["token"] and SLACK_TOKEN not in created.text
        assert view["filters"] == {"event_types": ["classification.*"], "tags": ["PII"], "assets": [], "asset_tags": []}
        assert api.post(base, json=body, headers=admin).status_code == 409

        got = api.get(f"{base}/pii-alerts", headers=admin)
        assert got.status_code == 200 and SLACK_TOKEN not in got.text
        # At rest the token is sealed: the stored document does not hold it; the runtime still delivers (below).
        stored = api.app.state.ctx.mongo[CONTROL_DATABASE]["subscription_secrets"].find_one(  # type: ignore[attr-defined]
            {"_id": f"{tenant}/pii-alerts"}
        )
        assert stored is not None and SLACK_TOKEN not in str(stored) and is_sealed(stored["values"]["token"])

        sent = _test_send(api, f"{base}/pii-alerts/test", admin, outbound)
        assert sent.status_code == 200, sent.text
        assert sent.json()["status"] == "delivered" and sent.json()["detail"] == "slack"
        (post,) = slack.posts()
        assert post["channel"] == "C0123" and post["text"].startswith("PII tag added to urn:metalake:metalake:test/")

        patched = api.patch(f"{base}/pii-alerts", json={"enabled": False, "filters": {"tags": ["GDPR"]}}, headers=admin)
        assert patched.status_code == 200 and patched.json()["enabled"] is False
        assert patched.json()["filters"]["tags"] == ["GDPR"]

        bad = api.post(base, json={**body, "name": "bad", "config": {"channel": "no spaces"}}, headers=admin)
        assert bad.status_code == 422 and bad.json()["field"] == "config/channel"
        missing = api.post(base, json={**body, "name": "bad", "secrets": {}}, headers=admin)
        assert missing.status_code == 422 and missing.json()["field"] == "secrets/token"
        unknown = api.post(base, json={**body, "name": "bad", "destination": "fax"}, headers=admin)
        assert unknown.status_code == 422 and unknown.json()["field"] == "destination"

        api.post(base, json={**body, "name": "second"}, headers=admin)
        first_page = api.get(base, params={"limit": 1}, headers=admin).json()
        assert [s["name"] for s in first_page["items"]] == ["pii-alerts"] and first_page["next_cursor"]
        second_page = api.get(base, params={"limit": 1, "cursor": first_page["next_cursor"]}, headers=admin).json()
        assert [s["name"] for s in second_page["items"]] == ["second"] and second_page["next_cursor"] is None

        reader = auth_headers(api, tenant=tenant, role="read-only", scope="tenant:read")
        assert api.get(base, headers=reader).status_code == 200
        assert api.post(base, json={**body, "name": "third"}, headers=reader).status_code == 403
        other = auth_headers(api, tenant=f"{tenant}x", role="admin")
        assert api.get(f"{base}/pii-alerts", headers=other).status_code == 404

        assert api.delete(f"{base}/second", headers=admin).status_code == 204
        assert api.get(f"{base}/second", headers=admin).status_code == 404
    finally:
        slack.stop()


def test_webhook_key_rotation_signs_with_both_keys(api: TestClient, outbound: RuntimeProcess, tenant: str) -> None:
    old_receiver, new_receiver = WebhookServer(WEBHOOK_SECRET).start(), WebhookServer(NEW_SECRET)
    try:
        admin = auth_headers(api, tenant=tenant, role="admin")
        base = f"/v1/tenants/{tenant}/subscriptions"
        body = {
            "name": "hook",
            "destination": "webhook",
            "config": {"url": f"{old_receiver.url}/in"},
            "secrets": {"key_id": "k1", "secret": WEBHOOK_SECRET},
        }
        assert api.post(base, json=body, headers=admin).status_code == 201
        rotated = api.patch(f"{base}/hook", json={"secrets": {"key_id": "k2", "secret": NEW_SECRET}}, headers=admin)
        assert rotated.status_code == 200 and NEW_SECRET not in rotated.text
        assert rotated.json()["secret_fields"] == ["key_id", "previous_key_id", "previous_secret", "secret"]

        assert _test_send(api, f"{base}/hook/test", admin, outbound).status_code == 200
        (delivery,) = old_receiver.verified  # verified with the old secret
        headers, raw = delivery["headers"], old_receiver.requests[-1].body
        assert headers["webhook-key-id"] == "k2 k1" and len(headers["webhook-signature"].split(" ")) == 2
        verify(NEW_SECRET, headers, raw, int(time.time()))  # and with the new one

        # Writing the current key again ends the overlap: one signature.
        api.patch(f"{base}/hook", json={"secrets": {"key_id": "k2", "secret": NEW_SECRET}}, headers=admin)
        store = SubscriptionStore(api.app.state.ctx.mongo[CONTROL_DATABASE], stack_sealer())  # type: ignore[attr-defined]
        assert sorted(store.stored_secrets(tenant, "hook")) == ["key_id", "secret"]
        raw = api.app.state.ctx.mongo[CONTROL_DATABASE]["subscription_secrets"].find_one({"_id": f"{tenant}/hook"})  # type: ignore[attr-defined]
        assert raw is not None and NEW_SECRET not in str(raw) and WEBHOOK_SECRET not in str(raw)

        # A new URL needs the secrets again: the stored ones are never sent to a host they were not given for.
        moved = {"url": "https://169.254.169.254/latest"}
        kept = api.patch(f"{base}/hook", json={"config": moved}, headers=admin)
        assert kept.status_code == 422 and kept.json()["field"] == "secrets/key_id", kept.text
        assert NEW_SECRET not in kept.text
        resent = {"key_id": "k3", "secret": NEW_SECRET}
        refused = api.patch(f"{base}/hook", json={"config": moved, "secrets": resent}, headers=admin)
        assert refused.status_code == 200, refused.text
        failed = _test_send(api, f"{base}/hook/test", admin, outbound)
        assert failed.status_code == 502 and "metadata" in failed.json()["detail"]
    finally:
        old_receiver.stop()
        new_receiver.stop()


def test_a_test_send_not_answered_in_time_is_polled(
    settings: Settings, mongo_client: MongoClient[dict[str, Any]], outbound: RuntimeProcess, tenant: str
) -> None:
    receiver = WebhookServer(WEBHOOK_SECRET).start()
    try:
        # Waiting 0 s: the API answers 202 at once, and the outcome is read from the Location.
        with _app(outbound_settings(settings), mongo_client, 0.0) as api:
            admin = auth_headers(api, tenant=tenant, role="admin")
            base = f"/v1/tenants/{tenant}/subscriptions"
            body = {
                "name": "hook",
                "destination": "webhook",
                "config": {"url": f"{receiver.url}/in"},
                "secrets": {"key_id": "k1", "secret": WEBHOOK_SECRET},
                "filters": {"tags": ["nothing-matches"]},
                "enabled": False,
            }
            assert api.post(base, json=body, headers=admin).status_code == 201
            accepted = api.post(f"{base}/hook/test", headers=admin)
            assert accepted.status_code == 202, accepted.text
            location = accepted.headers["Location"]
            test_id = accepted.json()["id"]
            assert location == f"{base}/hook/tests/{test_id}" and accepted.json()["status"] == "pending"

            deadline = time.monotonic() + 60
            status = accepted.json()
            while status["status"] == "pending" and time.monotonic() < deadline:
                time.sleep(0.2)
                polled = api.get(location, headers=admin)
                assert polled.status_code == 200, polled.text
                status = polled.json()
            # Disabled and filtered out: a test send reaches the destination all the same, once.
            assert status["status"] == "delivered", f"{status}; runtime log:\n{outbound.log()}"
            assert status["detail"] == "webhook 204" and status["refs"]["id"].startswith("mld_")
            assert len(receiver.verified) == 1
            assert receiver.verified[0]["headers"]["webhook-id"] == status["refs"]["id"]

            reader = auth_headers(api, tenant=tenant, role="read-only", scope="tenant:read")
            assert api.get(location, headers=reader).status_code == 200
            assert api.get(f"{base}/other/tests/{test_id}", headers=admin).status_code == 404
            other = auth_headers(api, tenant=f"{tenant}x", role="admin")
            assert (
                api.get(f"/v1/tenants/{tenant}x/subscriptions/hook/tests/{test_id}", headers=other).status_code == 404
            )
    finally:
        receiver.stop()
