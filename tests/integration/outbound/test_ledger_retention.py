"""Ledger retention on the real FerretDB: the TTL index where the server has one, the pruning pass where it has
not (expired steps go; live steps, young in-flight steps and anchors of tags still on their asset stay), and
anchors released only once the tag's removal was delivered through Slack and Jira (local servers)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from control.subscriptions.store import SubscriptionStore
from control.subscriptions.testsend import DELIVERIES
from metalake.expiry import EXPIRY_INDEX
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.runtime.destination import DestinationEnv, load_destinations
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.ledger import Ledger
from processors.outbound.runtime.retention import LedgerJanitor
from processors.outbound.runtime.retry import RetryPolicy
from processors.outbound.runtime.subscriptions import SubscriptionCache
from tenants.naming import CONTROL_DATABASE
from tests._support.jira_server import JiraServer
from tests._support.outbound_helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    SLACK_TOKEN,
    as_change,
    classification_event,
    jira_sub,
    outbound_settings,
    slack_sub,
)
from tests._support.sealing import stack_sealer
from tests._support.slack_server import SlackServer

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
EMAIL = "urn:metalake:postgres:prod/shop/public/customers/email"
SHORT = timedelta(seconds=1)
HOUR = timedelta(hours=1)


def _docs(mongo: Mongo, tenant: str) -> dict[tuple[str, str], dict[str, Any]]:
    """The tenant's ledger documents by kind and ``subscription/change/operation`` (steps) or
    ``subscription/asset/anchor`` (anchors; ``*`` for shared ones)."""
    out = {}
    for doc in mongo[CONTROL_DATABASE][DELIVERIES].find({"tenant": tenant}):
        middle = doc.get("change_id") or doc.get("asset", "")
        name = doc.get("operation") or doc.get("anchor", "")
        out[(doc["kind"], f"{doc.get('subscription', '*')}/{middle}/{name}")] = doc
    return out


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def test_the_ttl_index_exists_exactly_where_the_server_has_ttl_indexes(mongo: Mongo) -> None:
    ledger = Ledger(mongo[CONTROL_DATABASE])
    ttl = ledger.ensure_expiry()
    assert ledger.ensure_expiry() == ttl  # idempotent
    janitor = LedgerJanitor(ledger, 3600.0)
    janitor.start(background=False)
    assert janitor.pruning is not ttl  # the runtime prunes exactly where the server does not
    indexes = {i["name"]: i for i in mongo[CONTROL_DATABASE][DELIVERIES].list_indexes()}
    if ttl:
        assert indexes[EXPIRY_INDEX]["expireAfterSeconds"] == 0 and dict(indexes[EXPIRY_INDEX]["key"]) == {
            "expires_at": 1
        }
    else:
        # FerretDB 1.x: refused as NotImplemented, so the runtime prunes (this stack's case).
        assert EXPIRY_INDEX not in indexes
        assert "ferretdb" in str(mongo.admin.command("buildInfo")).lower()


def test_pruning_deletes_expired_documents_and_keeps_live_ones_and_young_in_flight_steps(
    mongo: Mongo, tenant: str
) -> None:
    control = mongo[CONTROL_DATABASE]
    # A writer with a short retention, one with an hour; pruning passes with either.
    short, hour = Ledger(control, SHORT), Ledger(control, HOUR)
    now = datetime.now(UTC)
    before = now.replace(microsecond=now.microsecond // 1000 * 1000)  # BSON keeps milliseconds
    short.scope(tenant, "slack", "c1").once("post", lambda prior: {"ts": "1.1"})
    short.scope(tenant, "slack", "c2").begin("post")  # the process died in the call: in flight
    hour.scope(tenant, "slack", "c3").once("post", lambda prior: {"ts": "3.3"})
    scope = short.scope(tenant, "slack", "c1")
    scope.set_anchor("slack-thread", "urn:kept", "pii", {"ts": "1.1"})
    scope.set_anchor("slack-thread", "urn:gone", "pii", {"ts": "2.2"})
    scope.release_anchor("slack-thread", "urn:gone", "pii")
    scope.share("jira-issue", "urn:gone", "pii", {"key": "GOV-1"})
    scope.unshare("jira-issue", "urn:gone", "pii")
    scope.share("jira-issue", "urn:kept", "pii", {"key": "GOV-2"})
    short.scope(tenant, "jira-b", "c1").share("jira-issue", "urn:kept", "pii", {"key": "OPS-1"})
    short.scope(tenant, "jira-b", "c1").unshare("jira-issue", "urn:kept", "pii")  # another one still shares

    docs = _docs(mongo, tenant)
    done, in_flight = docs[("step", "slack/c1/post")], docs[("step", "slack/c2/post")]
    assert before + SHORT <= _aware(done["expires_at"]) <= _aware(done["done_at"]) + SHORT
    assert _aware(in_flight["expires_at"]) == _aware(in_flight["started_at"]) + SHORT
    assert _aware(docs[("step", "slack/c3/post")]["expires_at"]) >= before + HOUR
    by = {(d["kind"], d["asset"]): d for d in docs.values() if d["kind"] in ("anchor", "shared")}
    assert "expires_at" not in by[("anchor", "urn:kept")] and "expires_at" in by[("anchor", "urn:gone")]
    assert "expires_at" not in by[("shared", "urn:kept")] and by[("shared", "urn:kept")]["fields"] == {
        "slack": {"key": "GOV-2"}
    }
    assert "expires_at" in by[("shared", "urn:gone")] and by[("shared", "urn:gone")]["fields"] == {}

    time.sleep(1.5)
    # An hour's retention: the in-flight step is past its expires_at but younger than that, so it stays.
    hour.prune()
    left = _docs(mongo, tenant)
    assert ("step", "slack/c1/post") not in left and ("step", "slack/c2/post") in left
    assert ("step", "slack/c3/post") in left
    assert {(d["kind"], d["asset"]) for d in left.values() if d["kind"] != "step"} == {
        ("anchor", "urn:kept"),
        ("shared", "urn:kept"),
    }
    # With the short retention the in-flight step is old enough to go; the rest stays.
    short.prune()
    left = _docs(mongo, tenant)
    assert {k for k in left if k[0] == "step"} == {("step", "slack/c3/post")}
    assert len(left) == 3

    # A redelivery moves a step's expiry on.
    step = hour.scope(tenant, "slack", "c3")
    first = _aware(left[("step", "slack/c3/post")]["expires_at"])
    time.sleep(0.01)
    assert step.once("post", lambda prior: {"ts": "never"}) == {"ts": "3.3"}
    assert _aware(_docs(mongo, tenant)[("step", "slack/c3/post")]["expires_at"]) > first


@pytest.fixture
def servers() -> Iterator[tuple[SlackServer, JiraServer]]:
    slack, jira = SlackServer(SLACK_TOKEN).start(), JiraServer(JIRA_EMAIL, JIRA_TOKEN).start()
    yield slack, jira
    slack.stop()
    jira.stop()


def test_anchors_expire_once_the_removal_was_delivered_and_are_kept_when_the_tag_returns(
    settings: Settings, mongo: Mongo, tenant: str, servers: tuple[SlackServer, JiraServer]
) -> None:
    slack, jira = servers
    control = mongo[CONTROL_DATABASE]
    store = SubscriptionStore(control, stack_sealer())
    slack_sub(store, tenant, slack.base_url, tags=("PII",))
    jira_sub(store, tenant, jira.url)
    s = outbound_settings(settings)
    destinations = load_destinations(DestinationEnv(s, AddressGuard.from_settings(s.outbound.ssrf_allow)))
    dispatcher = Dispatcher(
        SubscriptionCache(store, 0), destinations, Ledger(control, HOUR), RetryPolicy.from_settings(s.outbound)
    )

    def deliver(change: Any) -> list[str]:
        return [f"{sub.name}:{dispatcher.deliver(change, sub, 3).status}" for sub in dispatcher.targets(change)]

    def anchors() -> dict[tuple[str, str], dict[str, Any]]:
        return {(d["kind"], d["anchor"]): d for d in _docs(mongo, tenant).values() if d["kind"] != "step"}

    assert deliver(as_change(classification_event(tenant, EMAIL, "PII"))) == ["jira:delivered", "slack:delivered"]
    held = anchors()
    assert set(held) == {("anchor", "slack-thread"), ("anchor", "jira-issue"), ("shared", "jira-issue")}
    assert all("expires_at" not in d for d in held.values())

    removed_at = datetime.now(UTC)
    removed = as_change(classification_event(tenant, EMAIL, "PII", deleted=True, version=2))
    assert deliver(removed) == ["jira:delivered", "slack:delivered"]
    released = anchors()
    for key in held:
        assert removed_at + HOUR - timedelta(seconds=5) <= _aware(released[key]["expires_at"]), key
        assert _aware(released[key]["expires_at"]) <= datetime.now(UTC) + HOUR, key
    assert released[("shared", "jira-issue")]["fields"] == {}
    assert released[("anchor", "jira-issue")]["fields"]["open"] is False
    thread_ts = released[("anchor", "slack-thread")]["fields"]["ts"]

    # The tag comes back within the retention: the thread is kept and continued, Jira opens a new issue.
    assert deliver(as_change(classification_event(tenant, EMAIL, "PII", version=3))) == [
        "jira:delivered",
        "slack:delivered",
    ]
    back = anchors()
    assert all("expires_at" not in d for d in back.values())
    assert back[("anchor", "slack-thread")]["fields"]["ts"] == thread_ts
    assert back[("anchor", "jira-issue")]["fields"]["key"] == "GOV-2"
    assert back[("shared", "jira-issue")]["fields"] == {"jira": {"key": "GOV-2", "url": f"{jira.url}/browse/GOV-2"}}
    re_added, linked = slack.posts()[-2:]
    assert re_added["thread_ts"] == thread_ts and re_added["text"] == f"PII tag added to {EMAIL}"
    assert linked["thread_ts"] == thread_ts and "GOV-2" in linked["text"]
