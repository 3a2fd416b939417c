"""Slack, Jira and webhook destinations against local servers that speak their APIs, with the real ledger in
FerretDB: the exact calls, threading, dedup, and a redelivered change never posting twice. No Kafka here."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from control.subscriptions.store import SubscriptionStore
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.jira.destination import dedup_label
from processors.outbound.runtime.destination import DestinationEnv, load_destinations
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.ledger import Ledger
from processors.outbound.runtime.retry import RetryPolicy
from processors.outbound.runtime.subscriptions import SubscriptionCache
from tenants.naming import CONTROL_DATABASE
from tests._support.fake_http import Reply
from tests._support.jira_server import JiraServer
from tests._support.outbound_helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    SLACK_TOKEN,
    WEBHOOK_SECRET,
    as_change,
    classification_event,
    completed_event,
    jira_sub,
    outbound_settings,
    slack_sub,
    webhook_sub,
)
from tests._support.sealing import stack_sealer
from tests._support.slack_server import SlackServer
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

EMAIL = "urn:metalake:postgres:prod/shop/public/customers/email"
DOWNSTREAM = ["urn:metalake:postgres:prod/mart/public/c360/email_hash", "urn:metalake:postgres:prod/mart/public/x/e"]


@pytest.fixture
def servers() -> Iterator[tuple[SlackServer, JiraServer, WebhookServer]]:
    slack, jira, hook = SlackServer(SLACK_TOKEN).start(), JiraServer(JIRA_EMAIL, JIRA_TOKEN).start(), None
    hook = WebhookServer(WEBHOOK_SECRET).start()
    yield slack, jira, hook
    for server in (slack, jira, hook):
        server.stop()


def _dispatcher(settings: Settings, mongo: MongoClient[dict[str, Any]], **outbound: Any) -> Dispatcher:
    s = outbound_settings(settings, **outbound)
    control = mongo[CONTROL_DATABASE]
    destinations = load_destinations(DestinationEnv(s, AddressGuard.from_settings(s.outbound.ssrf_allow)))
    cache = SubscriptionCache(SubscriptionStore(control, stack_sealer()), 0)
    return Dispatcher(cache, destinations, Ledger(control), RetryPolicy.from_settings(s.outbound))


def _deliver_all(dispatcher: Dispatcher, change: Any) -> list[str]:
    return [f"{sub.name}:{dispatcher.deliver(change, sub, 3).status}" for sub in dispatcher.targets(change)]


def test_thread_issue_and_signed_webhook(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    slack, jira, hook = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    slack_sub(store, tenant, slack.base_url, tags=("PII",))
    jira_sub(store, tenant, jira.url)
    webhook_sub(store, tenant, f"{hook.url}/hooks/metalake")
    dispatcher = _dispatcher(settings, mongo)

    added = as_change(classification_event(tenant, EMAIL, "PII"))
    assert [s.name for s in dispatcher.targets(added)] == ["jira", "hook", "slack"]  # Jira first: Slack links it
    assert _deliver_all(dispatcher, added) == ["jira:delivered", "hook:delivered", "slack:delivered"]

    label = dedup_label(tenant, EMAIL, "PII")
    assert jira.calls() == [
        ("GET", "/rest/api/3/serverInfo"),
        ("GET", "/rest/api/3/field"),
        ("GET", "/rest/api/3/search/jql"),
        ("POST", "/rest/api/3/issue"),
    ]
    search = jira.seen("/rest/api/3/search/jql")[0]
    assert search.query["jql"] == [f'labels = "{label}" AND statusCategory != Done ORDER BY created ASC']
    created = jira.seen("/rest/api/3/issue")[0].json()["fields"]
    assert created["project"] == {"key": "GOV"} and created["issuetype"] == {"name": "Task"}
    assert created["labels"] == sorted(["metalake", "pii", label])
    assert created["description"]["type"] == "doc" and created["summary"].startswith("[PII] ")

    posts = slack.posts()
    assert len(posts) == 2
    parent, link = posts
    assert parent["channel"] == "C0123" and "thread_ts" not in parent
    assert parent["text"] == f"PII tag added to {EMAIL}"
    assert parent["blocks"][0]["type"] == "header"
    assert parent["metadata"]["event_type"] == "metalake_classification_added"
    assert parent["metadata"]["event_payload"]["dedup_key"].startswith("mld_")
    parent_ts = slack.messages[0]["ts"]
    assert link["thread_ts"] == parent_ts and "GOV-1" in link["text"]

    assert len(hook.verified) == 1 and hook.rejected == 0
    delivered = hook.verified[0]
    assert delivered["body"]["type"] == "classification.added" and delivered["body"]["change"]["asset"] == EMAIL
    assert delivered["headers"]["Idempotency-Key"] == delivered["headers"]["webhook-id"]
    assert delivered["headers"]["webhook-key-id"] == "k1"

    # The same change again (a redelivery): nothing new anywhere.
    assert _deliver_all(dispatcher, added) == ["jira:delivered", "hook:delivered", "slack:delivered"]
    assert len(slack.posts()) == 2 and len(jira.seen("/rest/api/3/issue")) == 1 and len(hook.verified) == 1

    # Propagation finished: the downstream list as a Jira comment and a thread reply.
    done = as_change(completed_event(tenant, EMAIL, "PII", DOWNSTREAM))
    assert _deliver_all(dispatcher, done) == ["jira:delivered", "hook:delivered", "slack:delivered"]
    comment = jira.seen("/rest/api/3/issue/GOV-1/comment", "POST")[0].json()["body"]
    assert comment["type"] == "doc" and DOWNSTREAM[0] in json.dumps(comment)
    reply = slack.posts()[2]
    assert reply["thread_ts"] == parent_ts and "propagated to 2 downstream" in reply["text"]

    # The tag is removed: comment, transition to done, reply in the thread.
    removed = as_change(classification_event(tenant, EMAIL, "PII", deleted=True, version=2))
    assert _deliver_all(dispatcher, removed) == ["jira:delivered", "hook:delivered", "slack:delivered"]
    assert jira.calls()[-3:] == [
        ("POST", "/rest/api/3/issue/GOV-1/comment"),
        ("GET", "/rest/api/3/issue/GOV-1/transitions"),
        ("POST", "/rest/api/3/issue/GOV-1/transitions"),
    ]
    assert jira.seen("/rest/api/3/issue/GOV-1/transitions", "POST")[0].json()["transition"] == {"id": 31}
    assert jira.issues["GOV-1"]["fields"]["status"]["statusCategory"]["key"] == "done"
    assert slack.posts()[3]["thread_ts"] == parent_ts and slack.posts()[3]["text"] == f"PII tag removed from {EMAIL}"
    assert len(slack.posts()) == 4 and len(hook.verified) == 3


def test_jira_dedups_by_label_search_before_creating(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    _, jira, _ = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    jira_sub(store, tenant, jira.url, name="jira-a")
    dispatcher = _dispatcher(settings, mongo)
    first = as_change(classification_event(tenant, EMAIL, "PII"))
    assert _deliver_all(dispatcher, first) == ["jira-a:delivered"]
    # A second subscription has no ledger entry for this asset: the JQL search finds the open issue.
    jira_sub(store, tenant, jira.url, name="jira-b")
    assert _deliver_all(dispatcher, as_change(classification_event(tenant, EMAIL, "PII", version=2))) == [
        "jira-a:delivered",
        "jira-b:delivered",
    ]
    assert len(jira.seen("/rest/api/3/issue", "POST")) == 1
    assert len(jira.seen("/rest/api/3/issue/GOV-1/comment", "POST")) == 2
    # Not a PII/GDPR tag: Jira is not interested.
    assert dispatcher.targets(as_change(classification_event(tenant, EMAIL, "internal"))) == []


def test_slack_429_retry_after_is_honoured(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    slack, _, _ = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    sub = slack_sub(store, tenant, slack.base_url)
    slack.fail_next("/api/chat.postMessage", Reply(429, {"ok": False, "error": "ratelimited"}, {"Retry-After": "1"}))
    dispatcher = _dispatcher(settings, mongo)
    change = as_change(classification_event(tenant, EMAIL, "PII"))
    started = time.monotonic()
    outcome = dispatcher.deliver(change, dispatcher.subscriptions.get(tenant, sub.name) or sub, 3)
    assert outcome.status == "delivered"
    first, second = slack.seen("/api/chat.postMessage")
    assert second.at - first.at >= 1.0 and time.monotonic() - started >= 1.0
    assert len(slack.messages) == 1


def test_slack_500_hands_over_to_the_retry_topic(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    slack, _, _ = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    slack_sub(store, tenant, slack.base_url)
    dispatcher = _dispatcher(settings, mongo, short_attempts=2)
    failure = Reply(500, {"ok": False, "error": "internal_error"})
    slack.fail_next("/api/chat.postMessage", failure, failure)
    change = as_change(classification_event(tenant, EMAIL, "PII"))
    sub = dispatcher.targets(change)[0]
    outcome = dispatcher.deliver(change, sub, 2)
    assert outcome.status == "retry" and "500" in outcome.reason
    # The breaker is open now: a main-loop delivery does not call Slack, the retry loop's probe does.
    assert dispatcher.deliver(change, sub, 3).error_class == "BreakerOpen"
    assert dispatcher.deliver(change, sub, 1, probe=True).status == "delivered"
    assert len(slack.messages) == 1 and len(slack.seen("/api/chat.postMessage")) == 3
