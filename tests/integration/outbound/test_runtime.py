"""The outbound runtime as a process on the real stack: changes published to metalake.changes reach Slack (one
thread), Jira (one issue) and a signed webhook; faults (Slack 500 via the retry topic, Jira really down, kill -9
after posting and before committing, FerretDB restarted while changes flow) neither lose nor duplicate anything, and
one tenant's failing destination does not hold back another tenant."""

from __future__ import annotations

import secrets
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent
from metalake.kafka import EventProducer, RawRecord
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.outbound.runtime.ledger import Ledger
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE
from tests._support.fake_http import Reply
from tests._support.itest import wait_for
from tests._support.jira_server import JiraServer
from tests._support.kafka_tail import mark, read_since
from tests._support.outbound_helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    SLACK_TOKEN,
    WEBHOOK_SECRET,
    classification_event,
    completed_event,
    jira_sub,
    slack_sub,
    webhook_sub,
)
from tests._support.outbound_runtime import (
    DLQ,
    MAIN_TOPICS,
    RETRY,
    RuntimeProcess,
    caught_up,
    commit_offsets,
    start_groups_at_end,
)
from tests._support.sealing import stack_sealer
from tests._support.slack_server import SlackServer
from tests._support.trickle_server import TrickleServer
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

EMAIL = "urn:metalake:postgres:prod/shop/public/customers/email"
PHONE = "urn:metalake:postgres:prod/shop/public/customers/phone"
DOWNSTREAM = ["urn:metalake:postgres:prod/mart/public/c360/email_hash"]
FAST = {
    "allow_base_url_override": True,
    "ssrf_allow": ["127.0.0.0/8"],
    "subscriptions_ttl_s": 1,
    "backoff_initial_s": 0.05,
    "backoff_max_s": 0.2,
    "retry_initial_s": 1,
    "retry_max_s": 3,
    "retry_topic_max_attempts": 60,
    "http_timeout_s": 3,
    "poll_timeout_s": 0.2,
    "session_timeout_ms": 6000,
}


@pytest.fixture
def runtime_env(settings: Settings) -> dict[str, Any]:
    """Fresh consumer groups positioned at the topics' ends, so the runtime sees only this test's changes."""
    run = secrets.token_hex(4)
    groups = {"group_id": f"it-outbound-{run}", "retry_group_id": f"it-outbound-retry-{run}"}
    start_groups_at_end(settings, {groups["group_id"]: MAIN_TOPICS, groups["retry_group_id"]: RETRY})
    return {**FAST, **groups}


@pytest.fixture
def processes(tmp_path: Path) -> Iterator[list[RuntimeProcess]]:
    started: list[RuntimeProcess] = []
    yield started
    for proc in started:
        proc.stop()


def _runtime(
    settings: Settings, tmp_path: Path, started: list[RuntimeProcess], env: dict[str, Any], **extra: Any
) -> RuntimeProcess:
    proc = RuntimeProcess(settings, tmp_path / f"outbound-{len(started)}.log", **{**env, **extra}).start()
    started.append(proc)
    return proc


def _publish(settings: Settings, *events: CloudEvent) -> None:
    with EventProducer(settings) as producer:
        producer.publish(list(events), lambda _: CHANGES_TOPIC)


def test_changes_reach_one_thread_one_issue_and_signed_webhooks(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    runtime_env: dict[str, Any],
    processes: list[RuntimeProcess],
    tmp_path: Path,
) -> None:
    slack, jira, hook = (
        SlackServer(SLACK_TOKEN).start(),
        JiraServer(JIRA_EMAIL, JIRA_TOKEN).start(),
        WebhookServer(WEBHOOK_SECRET).start(),
    )
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        slack_sub(store, tenant, slack.base_url)
        jira_sub(store, tenant, jira.url)
        webhook_sub(store, tenant, f"{hook.url}/in")
        proc = _runtime(settings, tmp_path, processes, runtime_env)
        before = mark(settings, CHANGES_TOPIC)
        events = [
            classification_event(tenant, EMAIL, "PII"),
            completed_event(tenant, EMAIL, "PII", DOWNSTREAM),
            classification_event(tenant, EMAIL, "PII", deleted=True, version=2),
        ]
        _publish(settings, *events)
        wait_for(
            "3 webhooks, 4 slack posts, jira transition",
            lambda: (
                (
                    len(hook.verified) == 3
                    and len(slack.posts()) == 4
                    and jira.seen("/rest/api/3/issue/GOV-1/transitions", "POST")
                )
                or None
            ),
            timeout_s=60,
        )
        parent, link, progress, removal = slack.posts()
        ts = slack.messages[0]["ts"]
        assert "thread_ts" not in parent and all(p["thread_ts"] == ts for p in (link, progress, removal))
        assert [m["text"] for m in slack.messages] == [
            f"PII tag added to {EMAIL}",
            f"Jira issue GOV-1 opened for PII on {EMAIL}",
            f"PII on {EMAIL} propagated to 1 downstream asset(s): +1 added, -0 removed",
            f"PII tag removed from {EMAIL}",
        ]
        assert len(jira.issues) == 1 and len(jira.comments["GOV-1"]) == 2
        assert [d["body"]["type"] for d in hook.verified] == [
            "classification.added",
            "propagation.completed",
            "classification.removed",
        ]
        assert hook.rejected == 0
        assert proc.stop() == 0

        # A second run over the same changes (a fresh group from before them): the ledger sends nothing again.
        again_group = runtime_env["group_id"] + "-again"
        commit_offsets(settings, again_group, CHANGES_TOPIC, before)
        again = _runtime(settings, tmp_path, processes, {**runtime_env, "group_id": again_group})
        wait_for("the replay consumed", lambda: caught_up(settings, again_group, CHANGES_TOPIC) or None, timeout_s=60)
        assert again.alive()
        assert len(slack.posts()) == 4 and len(jira.issues) == 1 and len(hook.verified) == 3
        assert len(jira.seen("/rest/api/3/issue", "POST")) == 1
    finally:
        for server in (slack, jira, hook):
            server.stop()


# Long enough for several retries through the retry topic (FAST: 1 s, doubling, at most 3 s apart).
JIRA_DOWN_S = 20.0


def test_failures_retry_later_and_never_block_another_tenant(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    runtime_env: dict[str, Any],
    processes: list[RuntimeProcess],
    tmp_path: Path,
) -> None:
    tenant_a, tenant_b = f"it-{secrets.token_hex(4)}", f"it-{secrets.token_hex(4)}"
    slack, jira = SlackServer(SLACK_TOKEN).start(), JiraServer(JIRA_EMAIL, JIRA_TOKEN).start()
    jira_port = jira.port
    jira.stop()  # really down: nothing listens on the port
    down_since = time.monotonic()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        jira_sub(store, tenant_a, f"http://127.0.0.1:{jira_port}")
        slack_sub(store, tenant_b, slack.base_url)
        failure = Reply(500, {"ok": False, "error": "internal_error"})
        slack.fail_next("/api/chat.postMessage", failure)
        retry_mark = mark(settings, RETRY)
        _runtime(settings, tmp_path, processes, runtime_env, short_attempts=1)
        _publish(settings, classification_event(tenant_a, EMAIL, "PII"), classification_event(tenant_b, PHONE, "PII"))

        # Tenant B: Slack failed once (500), went through the retry topic and was delivered, while Jira is down.
        wait_for("tenant B's slack message", lambda: slack.messages or None, timeout_s=60)
        assert len(slack.seen("/api/chat.postMessage")) == 2 and len(slack.messages) == 1
        retried = read_since(settings, RETRY, retry_mark, lambda r: True, expect=2, timeout_s=10)
        tenants = {r.headers.get("ce_tenantid", b"").decode() for r in retried}
        assert {tenant_a, tenant_b} <= tenants

        # Jira comes back on the same port after JIRA_DOWN_S down; tenant A's issue is then created, once.
        time.sleep(max(0.0, JIRA_DOWN_S - (time.monotonic() - down_since)))
        assert jira.requests == []
        jira.port = jira_port
        jira.start()
        wait_for("tenant A's jira issue", lambda: jira.issues or None, timeout_s=60)
        assert len(jira.seen("/rest/api/3/issue", "POST")) == 1
    finally:
        slack.stop()
        jira.stop()


def test_a_trickling_receiver_is_cut_at_the_deadline_and_holds_no_other_tenant(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    runtime_env: dict[str, Any],
    processes: list[RuntimeProcess],
    tmp_path: Path,
) -> None:
    tenant_a, tenant_b = f"it-{secrets.token_hex(4)}", f"it-{secrets.token_hex(4)}"
    # One byte a second: every read ends within http_timeout_s (3 s), only the deadline ends the delivery.
    trickle, hook = TrickleServer(interval=1.0, give_up_s=60).start(), WebhookServer(WEBHOOK_SECRET).start()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        webhook_sub(store, tenant_a, f"{trickle.url}/in")
        webhook_sub(store, tenant_b, f"{hook.url}/in")
        retry_mark = mark(settings, RETRY)
        _runtime(settings, tmp_path, processes, runtime_env, delivery_deadline_s=4, retry_initial_s=30, retry_max_s=30)
        _publish(settings, classification_event(tenant_a, EMAIL, "PII"), classification_event(tenant_b, PHONE, "PII"))

        wait_for("tenant B's webhook", lambda: hook.verified or None, timeout_s=30)
        # Causal, not a stopwatch from the publish (a loaded machine delays the poll itself): had B waited for A, it
        # would arrive only once A's connection was cut at its deadline.
        wait_for("tenant A's delivery cut", lambda: trickle.closed_at or None, timeout_s=30)
        assert hook.seen("/in")[0].at < min(trickle.closed_at), "tenant B waited for tenant A's receiver"
        [cut] = read_since(
            settings,
            RETRY,
            retry_mark,
            lambda r: r.headers.get("ce_tenantid") == tenant_a.encode(),
            expect=1,
            timeout_s=30,
        )
        assert b"deadline" in cut.headers["outbound.reason"]
        assert trickle.closed_after and min(trickle.closed_after) < 4 + 3
    finally:
        trickle.stop()
        hook.stop()


def test_kill_9_after_posting_before_committing_sends_nothing_twice(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    runtime_env: dict[str, Any],
    processes: list[RuntimeProcess],
    tmp_path: Path,
) -> None:
    slack, jira = SlackServer(SLACK_TOKEN).start(), JiraServer(JIRA_EMAIL, JIRA_TOKEN).start()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        jira_sub(store, tenant, jira.url)
        slack_sub(store, tenant, slack.base_url)

        # 1. Jira creates the issue, the answer is held, the runtime is killed: the ledger says "in flight".
        created = jira.hold_next("/rest/api/3/issue", 5)
        first = _runtime(settings, tmp_path, processes, runtime_env)
        _publish(settings, classification_event(tenant, EMAIL, "PII"))
        assert created.wait(60), first.log()
        first.kill9()
        ledger = Ledger(mongo[CONTROL_DATABASE])
        assert [s.state for s in ledger.steps_of(tenant, "jira")] == ["in_flight"]
        _runtime(settings, tmp_path, processes, runtime_env)
        wait_for("slack parent and link", lambda: len(slack.messages) >= 2 or None, timeout_s=60)
        assert len(jira.issues) == 1 and len(jira.seen("/rest/api/3/issue", "POST")) == 1

        # 2. Slack posts the reply, the answer is held, the runtime is killed; after restart, no second reply.
        posted = slack.hold_next("/api/chat.postMessage", 5)
        processes[-1].stop()
        third = _runtime(settings, tmp_path, processes, runtime_env)
        _publish(settings, completed_event(tenant, EMAIL, "PII", DOWNSTREAM))
        assert posted.wait(60), third.log()
        third.kill9()
        _runtime(settings, tmp_path, processes, runtime_env)
        wait_for(
            "the ledger marks the slack reply done",
            lambda: (
                (
                    all(s.state == "done" for s in ledger.steps_of(tenant, "slack"))
                    and len(ledger.steps_of(tenant, "slack")) == 3
                )
                or None
            ),
            timeout_s=60,
        )
        assert [m["text"] for m in slack.messages] == [
            f"PII tag added to {EMAIL}",
            f"Jira issue GOV-1 opened for PII on {EMAIL}",
            f"PII on {EMAIL} propagated to 1 downstream asset(s): +1 added, -0 removed",
        ]
        assert slack.seen("/api/conversations.replies")  # the restart looked for the message before posting
        assert len(jira.comments["GOV-1"]) == 1
    finally:
        slack.stop()
        jira.stop()


def test_permanent_failures_and_exhausted_retries_go_to_the_dlq_with_context(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    runtime_env: dict[str, Any],
    processes: list[RuntimeProcess],
    tmp_path: Path,
) -> None:
    slack = SlackServer(SLACK_TOKEN).start()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        webhook_sub(store, tenant, "https://169.254.169.254/latest/meta-data", name="metadata-hook")
        slack_sub(store, tenant, slack.base_url)
        failure = Reply(500, {"ok": False, "error": "internal_error"})
        slack.fail_next("/api/chat.postMessage", *[failure] * 5)
        dlq_mark = mark(settings, DLQ)
        _runtime(settings, tmp_path, processes, runtime_env, short_attempts=1, retry_topic_max_attempts=1)
        change = classification_event(tenant, EMAIL, "PII")
        _publish(settings, change)
        with EventProducer(settings) as producer:  # a record outbound cannot read: no tenant header
            producer.publish_raw([RawRecord(CHANGES_TOPIC, "bad", f"{tenant}:bad".encode(), b"{}", [("ce_id", b"x")])])

        dead = read_since(
            settings, DLQ, dlq_mark, lambda r: r.key is not None and r.key.startswith(tenant.encode()), expect=3
        )
        by_plugin = {r.headers.get("plugin", b"").decode(): r.headers for r in dead}
        assert set(by_plugin) == {"webhook", "slack", ""}
        hook = by_plugin["webhook"]
        assert hook["error.class"] == b"PermanentDelivery" and b"metadata" in hook["error.message"]
        assert hook["stage"] == b"outbound" and hook["tenant_id"] == tenant.encode()
        assert hook["outbound.subscription"] == b"metadata-hook" and hook["origin.topic"] == CHANGES_TOPIC.encode()
        assert hook["ce_id"] == change.id.encode()
        exhausted = by_plugin["slack"]
        assert exhausted["origin.topic"] == RETRY.encode() and exhausted["attempts"] == b"2"
        assert by_plugin[""]["error.class"] == b"InvalidChange"
        assert len(slack.seen("/api/chat.postMessage")) == 2 and slack.messages == []
    finally:
        slack.stop()


# Changes keep coming while FerretDB is away for about 30 of them (a change every 0.25 s).
CHANGE_EVERY_S = 0.25


def test_a_ferretdb_restart_while_changes_flow_neither_stops_the_runtime_nor_loses_a_delivery(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    runtime_env: dict[str, Any],
    processes: list[RuntimeProcess],
    tmp_path: Path,
    stack: StackManager,
) -> None:
    hook = WebhookServer(WEBHOOK_SECRET).start()
    try:
        webhook_sub(SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer()), tenant, f"{hook.url}/in")
        proc = RuntimeProcess(settings, tmp_path / "outbound.log", **runtime_env)
        # FerretDB's few seconds away are then an error in the runtime (as a connection closed mid-call is), not a
        # wait inside pymongo's server selection (10 s by default).
        proc.env["METALAKE_MONGO__SERVER_SELECTION_TIMEOUT_MS"] = "1000"
        processes.append(proc.start())
        published = []
        with EventProducer(settings) as producer:
            for i in range(60):
                if i == 10:
                    stack.down(["ferretdb"])  # the soak's restart-ferretdb ended the runtime in Ledger.begin
                if i == 40:
                    stack.up(["ferretdb"])
                event = classification_event(tenant, f"urn:metalake:postgres:prod/shop/public/t{i}/email", "PII")
                producer.publish([event], lambda _: CHANGES_TOPIC)
                published.append(event.id)
                time.sleep(CHANGE_EVERY_S)
        wait_for("every change delivered", lambda: len(hook.verified) >= len(published) or None, timeout_s=120)
        assert proc.alive(), proc.log()
        assert '"what": "outbound.batch"' in proc.log_path.read_text()  # it did meet the outage, and waited
        assert sorted(Counter(d["body"]["change"]["id"] for d in hook.verified)) == sorted(published)
        # A begin whose answer was lost is resent with the same webhook-id (receivers deduplicate on it).
        assert len({d["headers"].get("webhook-id") for d in hook.verified}) == len(published)
    finally:
        hook.stop()
