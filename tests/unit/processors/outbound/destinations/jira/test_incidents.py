"""Jira and Monte Carlo incidents: which incident changes it takes, the summary and ADF of an incident's issue (its
fields, the asset's owners and downstream impact, links) and of an update's comment, and the dedup label."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr

from catalog.changes import Change
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.common import incident_of
from processors.outbound.destinations.jira.destination import JiraDestination, dedup_label, incident_label
from processors.outbound.destinations.jira.messages import (
    jira_incident_comment,
    jira_incident_description,
    jira_incident_summary,
)
from processors.outbound.runtime.catalog import Impact
from processors.outbound.runtime.destination import DestinationEnv
from tests._support.jira_server import JiraServer
from tests._support.memory_ledger import MemoryLedger
from tests._support.outbound_helpers import JIRA_EMAIL, JIRA_TOKEN, as_change, classification_event, incident_event

URN = "urn:metalake:snowflake:acme-prod/analytics/public/orders"
DOWN = [f"urn:metalake:snowflake:acme-prod/mart/public/t{i}" for i in range(52)]
CATALOG = "https://metalake.example.com"


def _texts(node: Any) -> list[str]:
    if isinstance(node, dict):
        own = [node["text"]] if node.get("type") == "text" else []
        return own + [t for child in node.get("content", []) for t in _texts(child)]
    return []


def test_an_incident_issue_carries_the_incident_owners_impact_and_links() -> None:
    change = as_change(incident_event("acme", URN, "inc-7", "opened"))
    incident = incident_of(change)
    assert incident is not None
    assert jira_incident_summary(incident) == f"[Incident] {URN}: Has 42 rows vs. 101 expected"
    impact = Impact(("ana@example.com",), tuple(DOWN), truncated=False)
    doc = jira_incident_description(change, incident, impact, CATALOG)
    assert doc["type"] == "doc" and doc["version"] == 1
    texts = _texts(doc)
    assert texts[:5] == [
        f"Monte Carlo incident opened on {URN} (incident inc-7).",
        "Status: opened",
        "Type: ANOMALIES",
        "Severity: SEV-2",
        "Owner: oncall@example.com",
    ]
    assert texts[5:8] == [
        "Has 42 rows vs. 101 expected",
        "Owners: ana@example.com",
        "Downstream impact: 52 asset(s) reached by lineage",
    ]
    # At most 50 downstream assets listed, then how many more.
    assert texts[8:58] == DOWN[:50] and texts[58] == "… and 2 more"
    links = [m["attrs"]["href"] for n in doc["content"] for c in n.get("content", []) for m in c.get("marks", [])]
    assert links == [
        "https://getmontecarlo.com/incidents/inc-7",
        f"{CATALOG}/v1/tenants/acme/assets?urn={quote(URN, safe='')}",
    ]
    assert texts[-1] == f"Reported by metalake for tenant acme (change {change.id})."
    # Without a catalog reader or address: no impact paragraphs, no metalake link.
    bare = _texts(jira_incident_description(change, incident))
    assert not any(t.startswith(("Owners:", "Downstream")) for t in bare) and "Open in metalake" not in bare


def test_a_link_jira_would_refuse_is_left_out() -> None:
    change = as_change(incident_event("acme", URN, "inc-7", "opened"))
    data = {**change.data, "state": {**change.state, "url": "javascript:alert(1)"}}
    bad = Change(change.id, change.type, change.tenant, data, change.subject)
    incident = incident_of(bad)
    assert incident is not None
    assert "javascript" not in json.dumps(jira_incident_description(bad, incident))
    assert "Open in Monte Carlo" not in _texts(jira_incident_description(bad, incident))


def test_an_update_comment_says_the_new_status_and_carries_its_marker() -> None:
    incident = incident_of(as_change(incident_event("acme", URN, "inc-7", "resolved", summary="Back to normal")))
    assert incident is not None
    comment = jira_incident_comment(incident, "mld_c")
    assert _texts(comment) == [
        f"Monte Carlo incident resolved on {URN}",
        "Status: resolved",
        "Type: ANOMALIES",
        "Severity: SEV-2",
        "Owner: oncall@example.com",
        "Back to normal",
        "[metalake mld_c]",
    ]


def test_long_summaries_are_cut() -> None:
    incident = incident_of(as_change(incident_event("acme", URN, "i", "opened", summary="s" * 1000)))
    assert incident is not None and len(jira_incident_summary(incident)) == 255


def _sub(**config: Any) -> Subscription:
    return Subscription(
        "acme", "j", "jira", {"server": "https://jira.example", "email": "a@b.c", "project": "GOV", **config}
    )


def test_jira_takes_incidents_unless_turned_off_and_labels_them_apart_from_tags() -> None:
    jira = JiraDestination(env=None)
    opened = as_change(incident_event("acme", URN, "PII", "opened"))
    assert jira.accepts(opened, _sub()) and not jira.accepts(opened, _sub(incidents=False))
    assert jira.accepts(as_change(classification_event("acme", URN, "PII")), _sub(incidents=False))
    # An incident whose id reads like a tag gets its own issue; ids are compared as sent.
    assert incident_label("acme", URN, "PII") != dedup_label("acme", URN, "PII")
    assert incident_label("acme", URN, "inc-A") != incident_label("acme", URN, "inc-a")
    assert json.dumps(incident_label("acme", URN, "x")).startswith('"metalake-dedup-')


@pytest.fixture
def server() -> Iterator[JiraServer]:
    jira = JiraServer(JIRA_EMAIL, JIRA_TOKEN)
    jira.start()
    yield jira
    jira.stop()


def test_an_interrupted_create_is_recovered_by_the_incidents_label(server: JiraServer) -> None:
    """An attempt that died after Jira created the issue: the retry finds it by its label, files no second one, and
    the resolution still comments on it and closes it."""
    allow = ["127.0.0.0/8"]
    settings = Settings().model_copy(update={"outbound": OutboundSettings(http_timeout_s=5, ssrf_allow=allow)})
    jira = JiraDestination(DestinationEnv(settings, AddressGuard.from_settings(allow)))
    sub = Subscription(
        "acme",
        "j",
        "jira",
        {"server": server.url, "email": JIRA_EMAIL, "project": "GOV"},
        secrets={"api_token": SecretStr(JIRA_TOKEN)},
    )
    ledger = MemoryLedger()
    opened = as_change(incident_event("acme", URN, "inc-7", "opened"))
    assert jira.deliver(opened, sub, ledger.scope("acme", "j", opened.id)).detail == "jira issue created"
    ledger.interrupt("acme", "j", opened.id, "issue")
    ledger.anchors.clear()  # as if the ledger never learnt the key
    again = jira.deliver(opened, sub, ledger.scope("acme", "j", opened.id))
    assert again.refs == {"key": "GOV-1"} and len(server.issues) == 1 and server.comments["GOV-1"] == []
    ledger.anchors.clear()
    resolved = as_change(incident_event("acme", URN, "inc-7", "resolved", version=2))
    assert jira.deliver(resolved, sub, ledger.scope("acme", "j", resolved.id)).refs == {"key": "GOV-1"}
    assert server.issues["GOV-1"]["fields"]["status"]["name"] == "Done" and len(server.comments["GOV-1"]) == 1
    # A resolution with no open issue left is skipped.
    late = as_change(incident_event("acme", URN, "inc-7", "resolved", version=3))
    assert jira.deliver(late, sub, ledger.scope("acme", "j", late.id)).status == "skipped"
