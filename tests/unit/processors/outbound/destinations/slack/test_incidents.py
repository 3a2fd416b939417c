"""Slack and Monte Carlo incidents: which incident changes it takes, the Block Kit of a thread's first message and of
its replies, and a delivery to the local Slack stand-in (opened, updated, resolved: one thread of three messages; a
redelivery posts nothing; an interrupted post is found by its dedup key)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from catalog.changes import STATE_CHANGED, Change
from control.subscriptions.filters import Filters
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.common import incident_anchor, incident_of
from processors.outbound.destinations.slack.destination import THREAD, SlackDestination
from processors.outbound.destinations.slack.messages import slack_incident_message
from processors.outbound.runtime.catalog import Impact
from processors.outbound.runtime.destination import DestinationEnv
from tests._support.memory_ledger import MemoryLedger
from tests._support.outbound_helpers import SLACK_TOKEN, as_change, classification_event, incident_event
from tests._support.slack_server import SlackServer

URN = "urn:metalake:snowflake:acme-prod/analytics/public/orders"
DOWN = [f"urn:metalake:snowflake:acme-prod/mart/public/t{i}" for i in range(7)]
CATALOG = "https://metalake.example.com"


def _fields(block: dict[str, Any]) -> dict[str, str]:
    return dict(tuple(f["text"].removeprefix("*").split("*\n", 1)) for f in block["fields"])


def test_the_opening_message_carries_the_incident_owners_and_impact() -> None:
    change = as_change(incident_event("acme", URN, "inc-7", "opened"))
    incident = incident_of(change)
    assert incident is not None
    impact = Impact(("ana@example.com", "data-eng"), tuple(DOWN), truncated=True)
    message = slack_incident_message(change, incident, "mld_x", opening=True, impact=impact, catalog_url=CATALOG)
    assert message["text"] == f"Monte Carlo incident opened on {URN}"
    header, facts, summary, reach, context, actions = message["blocks"]
    assert header == {"type": "header", "text": {"type": "plain_text", "text": message["text"]}}
    assert _fields(facts) == {
        "Asset": f"`{URN}`",
        "Status": "opened",
        "Incident": "inc-7",
        "Type": "ANOMALIES",
        "Owner": "oncall@example.com",
        "Severity": "SEV-2",
    }
    assert summary["text"]["text"] == "Has 42 rows vs. 101 expected"
    owners, downstream = _fields(reach).values()
    assert owners == "ana@example.com, data-eng"
    lines = downstream.split("\n")
    assert lines[0] == "7+ asset(s) reached by lineage"
    assert lines[1:6] == [f"- {u}" for u in DOWN[:5]] and lines[6] == "- … and 2+ more"
    assert context["elements"][0]["text"] == f"incidents.changed · change {change.id}"
    assert [(b["text"]["text"], b["url"]) for b in actions["elements"]] == [
        ("Open in Monte Carlo", "https://getmontecarlo.com/incidents/inc-7"),
        ("Open in metalake", f"{CATALOG}/v1/tenants/acme/assets?urn={quote(URN, safe='')}"),
    ]
    assert message["metadata"] == {
        "event_type": "metalake_incident_opened",
        "event_payload": {
            "tenant": "acme",
            "asset": URN,
            "incident_id": "inc-7",
            "change_id": change.id,
            "dedup_key": "mld_x",
        },
    }


def test_a_reply_says_the_new_status_without_repeating_the_impact() -> None:
    change = as_change(incident_event("acme", URN, "inc-7", "resolved", summary="Back to 101 rows"))
    incident = incident_of(change)
    assert incident is not None
    message = slack_incident_message(change, incident, "mld_y", opening=False, impact=None, catalog_url=CATALOG)
    assert message["text"] == f"Monte Carlo incident resolved on {URN}"
    kinds = [b["type"] for b in message["blocks"]]
    assert kinds == ["header", "section", "section", "context", "actions"]
    assert _fields(message["blocks"][1]) == {"Status": "resolved", "Severity": "SEV-2"}
    assert message["blocks"][2]["text"]["text"] == "Back to 101 rows"
    assert [b["text"]["text"] for b in message["blocks"][4]["elements"]] == ["Open in Monte Carlo"]
    assert message["metadata"]["event_type"] == "metalake_incident_resolved"


def test_long_texts_stay_within_slacks_limits() -> None:
    change = as_change(incident_event("acme", URN + "x" * 200, "inc-8", "opened", summary="s" * 5000))
    incident = incident_of(change)
    assert incident is not None
    impact = Impact(("o" * 3000,), tuple(DOWN), truncated=False)
    blocks = slack_incident_message(change, incident, "k", opening=True, impact=impact)["blocks"]
    assert len(blocks[0]["text"]["text"]) == 150
    assert all(len(f["text"]) <= 2000 for b in blocks if "fields" in b for f in b["fields"])
    assert len(blocks[2]["text"]["text"]) == 3000


def _with_url(url: str) -> Change:
    change = as_change(incident_event("acme", URN, "inc-9", "opened"))
    state = {**change.state, "url": url}
    return Change(change.id, change.type, change.tenant, {**change.data, "state": state}, change.subject)


@pytest.mark.parametrize(
    "url", ["javascript:alert(1)", "getmontecarlo.com/incidents/x", "https://x.example/a b", "https://x/" + "a" * 3000]
)
def test_a_link_slack_would_refuse_is_left_out_not_sent(url: str) -> None:
    change = _with_url(url)
    incident = incident_of(change)
    assert incident is not None and incident.url == url
    blocks = slack_incident_message(change, incident, "k", opening=True)["blocks"]
    assert blocks[-1]["type"] == "context" and url not in json.dumps(blocks)


def _sub(**config: Any) -> Subscription:
    return Subscription("acme", "s", "slack", {"channel": "C1", **config})


def test_slack_takes_incidents_unless_turned_off() -> None:
    slack = SlackDestination(env=None)  # type: ignore[arg-type]
    opened = as_change(incident_event("acme", URN, "i", "opened"))
    assert slack.accepts(opened, _sub())
    assert not slack.accepts(opened, _sub(incidents=False))
    assert slack.accepts(as_change(classification_event("acme", URN, "PII")), _sub(incidents=False))
    # An erased incidents row is no news.
    erased = Change("c", STATE_CHANGED, "acme", {"table": "incidents", "key": {"incident_id": "i", "urn": URN}})
    assert erased.kind == "incidents.changed" and not slack.accepts(erased, _sub())
    # A ``tags`` filter is about tag changes: it lets no incident through (``asset_tags`` narrows incidents).
    assert not Filters(tags=("PII",)).matches(opened)


def test_an_incident_never_shares_a_tags_anchor() -> None:
    incident = incident_of(as_change(incident_event("acme", URN, "PII", "opened")))
    assert incident is not None and incident_anchor(incident) == "#incident:PII"


class _Catalog:
    def __init__(self) -> None:
        self.reads: list[tuple[str, str]] = []

    def impact(self, tenant: str, urn: str) -> Impact:
        self.reads.append((tenant, urn))
        return Impact(("ana@example.com",), tuple(DOWN[:2]), truncated=False)


@pytest.fixture
def server() -> Iterator[SlackServer]:
    slack = SlackServer(SLACK_TOKEN)
    slack.start()
    yield slack
    slack.stop()


def test_an_incident_is_one_thread_of_three_messages_posted_once(server: SlackServer) -> None:
    allow = ["127.0.0.0/8"]
    settings = Settings().model_copy(
        update={"outbound": OutboundSettings(ssrf_allow=allow, allow_base_url_override=True, http_timeout_s=5.0)}
    )
    catalog = _Catalog()
    slack = SlackDestination(DestinationEnv(settings, AddressGuard.from_settings(allow), catalog))  # type: ignore[arg-type]
    sub = Subscription(
        "acme", "s", "slack", {"channel": "C1", "base_url": server.base_url}, secrets={"token": SecretStr(SLACK_TOKEN)}
    )
    ledger = MemoryLedger()
    changes = [
        as_change(incident_event("acme", URN, "inc-7", status, version=n))
        for n, status in enumerate(("opened", "updated", "resolved"), 1)
    ]
    for change in changes:
        assert slack.deliver(change, sub, ledger.scope("acme", "s", change.id)).status == "delivered"
    opened, updated, resolved = server.posts()
    assert "thread_ts" not in opened and opened["channel"] == "C1"
    parent = server.messages[0]["ts"]
    assert updated["thread_ts"] == resolved["thread_ts"] == parent
    assert [p["text"] for p in (opened, updated, resolved)] == [
        f"Monte Carlo incident {s} on {URN}" for s in ("opened", "updated", "resolved")
    ]
    # The impact was read once, for the thread's first message.
    assert catalog.reads == [("acme", URN)] and DOWN[1] in json.dumps(opened["blocks"])
    assert ("s", THREAD, URN, "#incident:inc-7") in ledger.released

    # Redelivered: every post step is done, nothing is posted, nothing is read.
    for change in changes:
        slack.deliver(change, sub, ledger.scope("acme", "s", change.id))
    assert len(server.posts()) == 3 and len(catalog.reads) == 1

    # An attempt that died after Slack took the message: found in the thread by its dedup key, not posted again.
    again = as_change(incident_event("acme", URN, "inc-7", "updated", version=4))
    ledger.interrupt("acme", "s", again.id, "post")
    slack.deliver(again, sub, ledger.scope("acme", "s", again.id))
    assert len(server.posts()) == 4
    ledger.interrupt("acme", "s", again.id, "post")
    slack.deliver(again, sub, ledger.scope("acme", "s", again.id))
    assert len(server.posts()) == 4 and len(server.seen("/api/conversations.replies")) == 2
