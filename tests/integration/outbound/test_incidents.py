"""Monte Carlo incidents to Slack, Jira and webhooks through the dispatcher, with the ledger and the catalog's reads
(owners, downstream impact) on FerretDB and local stand-ins that check the exact requests; and once through the
runtime as a process on Kafka."""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from pymongo.database import Database

from api.app import create_app
from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent
from metalake.kafka import EventProducer
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.jira.destination import JiraDestination, incident_label
from processors.outbound.destinations.slack.destination import SlackDestination
from processors.outbound.destinations.webhook.destination import WebhookDestination
from processors.outbound.runtime.catalog import Catalog
from processors.outbound.runtime.destination import Destination, DestinationEnv
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.ledger import Ledger
from processors.outbound.runtime.retry import RetryPolicy
from processors.outbound.runtime.subscriptions import SubscriptionCache
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE, names_for
from tests._support.itest import wait_for
from tests._support.jira_server import JiraServer
from tests._support.outbound_helpers import (
    JIRA_EMAIL,
    JIRA_TOKEN,
    SLACK_TOKEN,
    WEBHOOK_SECRET,
    as_change,
    classification_event,
    incident_event,
    jira_sub,
    outbound_settings,
    slack_sub,
    webhook_sub,
)
from tests._support.outbound_runtime import MAIN_TOPICS, RETRY, RuntimeProcess, start_groups_at_end
from tests._support.sealing import stack_sealer
from tests._support.slack_server import SlackServer
from tests._support.tokens import auth_headers
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

DOC = Path(__file__).resolve().parents[3] / "docs" / "outbound.md"
ORDERS = "urn:metalake:snowflake:acme-prod/analytics/public/orders"
MART, REPORT = f"{ORDERS}_mart", f"{ORDERS}_report"


@pytest.fixture
def catalog_db(settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str) -> Iterator[Database[Any]]:
    """The tenant's projection: ORDERS owned by ana, two assets downstream of it, PII on ORDERS."""
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    meta = {"version": 1, "event_id": "e1", "deleted": False}
    db["assets"].insert_one({"_id": ORDERS, "urn": ORDERS, "owners": ["ana@example.com"], **meta})
    db["lineage"].insert_many([{"_id": f"{ORDERS}|{d}", "upstream": ORDERS, "urn": d, **meta} for d in (MART, REPORT)])
    db["classifications"].insert_one({"_id": f"{ORDERS}|PII", "urn": ORDERS, "tag": "PII", "source": "human", **meta})
    yield db
    mongo.drop_database(db.name)


def _dispatcher(
    settings: Settings, mongo: MongoClient[dict[str, Any]], make: dict[str, type[Destination]]
) -> Dispatcher:
    s = outbound_settings(settings)
    reader = Catalog(mongo, lambda: settings.lake_root)
    env = DestinationEnv(s, AddressGuard.from_settings(s.outbound.ssrf_allow), reader)
    control = mongo[CONTROL_DATABASE]
    return Dispatcher(
        SubscriptionCache(SubscriptionStore(control, stack_sealer()), 0),
        {name: cls(env) for name, cls in make.items()},
        Ledger(control),
        RetryPolicy.from_settings(s.outbound),
        asset_tags=reader.tags,
    )


def _deliver_all(dispatcher: Dispatcher, event: CloudEvent) -> list[str]:
    change = as_change(event)
    return [f"{sub.name}:{dispatcher.deliver(change, sub, 3).status}" for sub in dispatcher.targets(change)]


@pytest.fixture
def slack() -> Iterator[SlackServer]:
    server = SlackServer(SLACK_TOKEN)
    server.start()
    yield server
    server.stop()


def test_slack_one_thread_per_incident_on_pii_assets(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, catalog_db: Any, slack: SlackServer
) -> None:
    slack_sub(SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer()), tenant, slack.base_url, asset_tags=("PII",))
    dispatcher = _dispatcher(settings, mongo, {"slack": SlackDestination})
    events = [
        incident_event(tenant, ORDERS, "inc-42", s, version=n)
        for n, s in enumerate(("opened", "updated", "resolved"), 1)
    ]
    for event in events:
        assert _deliver_all(dispatcher, event) == ["slack:delivered"]
    opened, updated, resolved = slack.posts()
    assert "thread_ts" not in opened and opened["channel"] == "C0123"
    parent = slack.messages[0]["ts"]
    assert updated["thread_ts"] == resolved["thread_ts"] == parent
    assert [p["text"] for p in slack.posts()] == [
        f"Monte Carlo incident {s} on {ORDERS}" for s in ("opened", "updated", "resolved")
    ]
    blocks = json.dumps(opened["blocks"])
    assert "*Asset owners*\\nana@example.com" in blocks and "2 asset(s) reached by lineage" in blocks
    assert f"- {MART}" in blocks and f"- {REPORT}" in blocks
    assert opened["metadata"]["event_payload"]["incident_id"] == "inc-42"

    # Redelivered, also by a restarted runtime (a new dispatcher): the ledger in FerretDB has every post done.
    for event in events:
        assert _deliver_all(_dispatcher(settings, mongo, {"slack": SlackDestination}), event) == ["slack:delivered"]
    assert len(slack.posts()) == 3

    # An incident on an asset without PII reaches no one.
    assert _deliver_all(dispatcher, incident_event(tenant, MART, "inc-43", "opened")) == []
    assert len(slack.seen("/api/chat.postMessage")) == 3


def test_jira_one_issue_per_incident_linked_into_the_slack_thread(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, catalog_db: Any, slack: SlackServer
) -> None:
    jira = JiraServer(JIRA_EMAIL, JIRA_TOKEN)
    jira.start()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        jira_sub(store, tenant, jira.url)
        slack_sub(store, tenant, slack.base_url)
        make: dict[str, type[Destination]] = {"jira": JiraDestination, "slack": SlackDestination}
        dispatcher = _dispatcher(settings, mongo, make)
        events = [
            incident_event(tenant, ORDERS, "inc-9", s, version=n, summary=f"{s}: 42 rows vs. 101 expected")
            for n, s in enumerate(("opened", "updated", "resolved"), 1)
        ]
        assert _deliver_all(dispatcher, events[0]) == ["jira:delivered", "slack:delivered"]
        label = incident_label(tenant, ORDERS, "inc-9")
        assert jira.calls()[-2:] == [("GET", "/rest/api/3/search/jql"), ("POST", "/rest/api/3/issue")]
        search = jira.seen("/rest/api/3/search/jql")[0]
        assert search.query["jql"] == [f'labels = "{label}" AND statusCategory != Done ORDER BY created ASC']
        fields = jira.seen("/rest/api/3/issue", "POST")[0].json()["fields"]
        assert fields["summary"] == f"[Incident] {ORDERS}: opened: 42 rows vs. 101 expected"
        assert fields["labels"] == sorted(["metalake", "monte-carlo-incident", label])
        description = json.dumps(fields["description"])
        assert "Owners: ana@example.com" in description and "Downstream impact: 2 asset(s)" in description
        assert MART in description and REPORT in description
        # The Slack thread opens with the issue's button and a reply linking it.
        opened, link = slack.posts()
        assert "GOV-1" in json.dumps(opened["blocks"]) and link["thread_ts"] == slack.messages[0]["ts"]
        assert link["text"] == f"Jira issue GOV-1 opened for Monte Carlo incident inc-9 on {ORDERS}"

        assert _deliver_all(dispatcher, events[1]) == ["jira:delivered", "slack:delivered"]
        assert jira.calls()[-1] == ("POST", "/rest/api/3/issue/GOV-1/comment")
        assert "Status: updated" in json.dumps(jira.comments["GOV-1"][0]["body"])

        assert _deliver_all(dispatcher, events[2]) == ["jira:delivered", "slack:delivered"]
        assert jira.calls()[-3:] == [
            ("POST", "/rest/api/3/issue/GOV-1/comment"),
            ("GET", "/rest/api/3/issue/GOV-1/transitions"),
            ("POST", "/rest/api/3/issue/GOV-1/transitions"),
        ]
        assert jira.issues["GOV-1"]["fields"]["status"]["statusCategory"]["key"] == "done"
        assert [p["text"] for p in slack.posts()[2:]] == [
            f"Monte Carlo incident {s} on {ORDERS}" for s in ("updated", "resolved")
        ]

        # Redelivered by a restarted runtime: nothing new in Jira or Slack.
        writes = len([r for r in jira.requests if r.method == "POST"])
        for event in events:
            assert _deliver_all(_dispatcher(settings, mongo, make), event) == ["jira:delivered", "slack:delivered"]
        assert len([r for r in jira.requests if r.method == "POST"]) == writes and len(slack.posts()) == 4

        # The same incident on another asset (Monte Carlo sends one row per affected table) is an issue of its own.
        assert _deliver_all(dispatcher, incident_event(tenant, MART, "inc-9", "opened")) == [
            "jira:delivered",
            "slack:delivered",
        ]
        assert len(jira.issues) == 2
    finally:
        jira.stop()


def test_a_signed_webhook_of_an_incident_carries_its_impact(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, catalog_db: Any
) -> None:
    hook = WebhookServer(WEBHOOK_SECRET)
    hook.start()
    try:
        webhook_sub(SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer()), tenant, f"{hook.url}/hooks/metalake")
        dispatcher = _dispatcher(settings, mongo, {"webhook": WebhookDestination})
        event = incident_event(tenant, ORDERS, "inc-5", "opened")
        assert _deliver_all(dispatcher, event) == ["hook:delivered"]
        assert _deliver_all(dispatcher, event) == ["hook:delivered"]  # a redelivery sends nothing
        assert hook.rejected == 0 and len(hook.verified) == 1
        body = hook.verified[0]["body"]
        assert body["type"] == "incidents.changed" and body["change"]["data"]["state"]["status"] == "opened"
        assert body["impact"] == {
            "owners": ["ana@example.com"],
            "downstream_count": 2,
            "downstream": [MART, REPORT],
            "truncated": False,
        }
    finally:
        hook.stop()


def test_the_impact_names_the_owners_edited_in_the_catalog_until_the_edit_is_cleared(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, catalog_db: Any
) -> None:
    reader = Catalog(mongo, lambda: settings.lake_root)
    edit = {"_id": f"{ORDERS}|owners", "urn": ORDERS, "aspect": "owners", "owners": ["dpo@example.com"], "version": 1}
    catalog_db["asset_edits"].insert_one({**edit, "deleted": False})
    assert reader.impact(tenant, ORDERS).owners == ("dpo@example.com",)
    catalog_db["asset_edits"].update_one({"_id": edit["_id"]}, {"$set": {"deleted": True, "version": 2}})
    assert reader.impact(tenant, ORDERS).owners == ("ana@example.com",)


def test_the_documented_pii_incidents_subscription_runs_as_written(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, catalog_db: Any, slack: SlackServer
) -> None:
    """docs/outbound.md's example, created through the API (only the stand-in's address and token swapped in), then
    incidents on a PII-tagged and an untagged asset and a tag change through the dispatcher."""
    section = DOC.read_text("utf-8").split("\n## Incidents\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```json\n(.*?)```", section, re.DOTALL)
    body = json.loads(block)
    body["config"]["base_url"] = slack.base_url
    body["secrets"]["token"] = SLACK_TOKEN
    with TestClient(create_app(outbound_settings(settings), mongo=mongo)) as api:
        created = api.post(
            f"/v1/tenants/{tenant}/subscriptions", json=body, headers=auth_headers(api, tenant=tenant, role="admin")
        )
    assert created.status_code == 201, created.text
    dispatcher = _dispatcher(settings, mongo, {"slack": SlackDestination})
    assert _deliver_all(dispatcher, incident_event(tenant, ORDERS, "inc-1", "opened")) == [
        "slack-pii-incidents:delivered"
    ]
    assert _deliver_all(dispatcher, incident_event(tenant, MART, "inc-2", "opened")) == []
    assert _deliver_all(dispatcher, classification_event(tenant, ORDERS, "PII", version=2)) == []
    (opened,) = slack.posts()
    assert opened["channel"] == "C0GOVERNANCE" and opened["text"] == f"Monte Carlo incident opened on {ORDERS}"
    assert "https://metalake.example.com/v1/tenants/" in json.dumps(opened["blocks"])


def test_the_runtime_process_delivers_an_incident_lifecycle_everywhere(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    tenant: str,
    catalog_db: Any,
    slack: SlackServer,
    tmp_path: Path,
) -> None:
    jira, hook = JiraServer(JIRA_EMAIL, JIRA_TOKEN), WebhookServer(WEBHOOK_SECRET)
    jira.start()
    hook.start()
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    jira_sub(store, tenant, jira.url)
    slack_sub(store, tenant, slack.base_url, event_types=("incidents.*",), asset_tags=("PII",))
    webhook_sub(store, tenant, f"{hook.url}/hooks/metalake")
    run = secrets.token_hex(4)
    groups = {"group_id": f"it-incidents-{run}", "retry_group_id": f"it-incidents-retry-{run}"}
    start_groups_at_end(settings, {groups["group_id"]: MAIN_TOPICS, groups["retry_group_id"]: RETRY})
    proc = RuntimeProcess(
        settings,
        tmp_path / "outbound.log",
        allow_base_url_override=True,
        ssrf_allow=["127.0.0.0/8"],
        subscriptions_ttl_s=1,
        poll_timeout_s=0.2,
        http_timeout_s=5,
        **groups,
    ).start()
    try:
        events = [
            incident_event(tenant, ORDERS, "inc-31", s, version=n)
            for n, s in enumerate(("opened", "updated", "resolved"), 1)
        ]
        with EventProducer(settings) as producer:
            producer.publish(events, lambda _: CHANGES_TOPIC)
        wait_for(
            "a Slack thread of four, the Jira issue done, three webhooks",
            lambda: (
                (
                    len(slack.posts()) == 4
                    and len(hook.verified) == 3
                    and jira.issues.get("GOV-1", {}).get("fields", {}).get("status", {}).get("name") == "Done"
                )
                or None
            ),
            timeout_s=90,
        )
        opened, link, updated, resolved = slack.posts()
        assert "ana@example.com" in json.dumps(opened["blocks"]) and "GOV-1" in link["text"]
        assert {p["thread_ts"] for p in (link, updated, resolved)} == {slack.messages[0]["ts"]}
        assert [w["body"]["change"]["data"]["state"]["status"] for w in hook.verified] == [
            "opened",
            "updated",
            "resolved",
        ]
        assert all(w["body"]["impact"]["downstream"] == [MART, REPORT] for w in hook.verified)
        assert len(jira.issues) == 1 and len(jira.comments["GOV-1"]) == 2 and hook.rejected == 0
        assert proc.stop() == 0, proc.log()
    finally:
        proc.stop()
        jira.stop()
        hook.stop()
