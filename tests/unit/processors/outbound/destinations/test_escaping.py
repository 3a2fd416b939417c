"""Free text from events (the actor, asset and tag names, downstream URNs, what Monte Carlo sent) reaches people's
tools as text, never as markup: Slack mrkdwn escapes ``& < >`` (no ``<!channel>``, no disguised ``<url|text>`` link),
Teams' Markdown is backslash-escaped (no ``[text](url)`` link, no emphasis), Jira's ADF text nodes carry no marks
from it, Freshdesk's HTML escapes it."""

from __future__ import annotations

import json
import re
from typing import Any

from catalog.changes import Change, StateChange
from processors.outbound.destinations.common import incident_of
from processors.outbound.destinations.freshdesk.messages import incident_description, tag_description
from processors.outbound.destinations.jira.messages import jira_description, jira_incident_description
from processors.outbound.destinations.slack.messages import jira_link_message, slack_incident_message, slack_message
from processors.outbound.destinations.teams.messages import md, teams_card
from tests._support.outbound_helpers import as_change, incident_event

URN = "urn:metalake:postgres:prod/shop/public/customers/email"
EVIL = "<!channel> <https://evil.example|click here> [click](https://evil.example) **urgent** _now_ <b>x</b> & more"


def _tag_change(actor: str = EVIL) -> Change:
    event = StateChange(
        id="c-1",
        source="/tests",
        tenant="acme",
        table="classifications",
        key={"urn": URN, "tag": "PII"},
        deleted=False,
        version=1,
        event_id="e-1",
        state={"source": "human", "propagate": True, "actor": actor},
    ).event()
    return as_change(event)


def _incident_change() -> Change:
    return as_change(incident_event("acme", URN, "inc-1", "opened", summary=EVIL))


def _texts(value: Any) -> list[str]:
    """Every string under ``value`` (a message or card)."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _texts(v)]
    if isinstance(value, list):
        return [t for v in value for t in _texts(v)]
    return []


def _slack_mrkdwn(message: dict[str, Any]) -> list[str]:
    found = [message["text"]]

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            if value.get("type") == "mrkdwn":
                found.append(value["text"])
            for v in value.values():
                walk(v)
        elif isinstance(value, list):
            for v in value:
                walk(v)

    walk(message["blocks"])
    return found


def test_slack_shows_the_actor_and_monte_carlos_text_without_mentions_or_links() -> None:
    incident = _incident_change()
    found = incident_of(incident)
    assert found is not None
    messages = [
        slack_message(_tag_change(), "d1"),
        slack_incident_message(incident, found, "d2", opening=True),
        jira_link_message("GOV-1", "https://jira.example/browse/GOV-1", "d3", _tag_change(), about=EVIL),
    ]
    for message in messages:
        texts = _slack_mrkdwn(message)
        assert any("&lt;!channel&gt;" in t for t in texts), texts
        for text in texts:
            # Slack's control sequences are <...>: none but the runtime's own Jira link survives.
            assert "<!channel>" not in text and "<https://evil.example" not in text
            assert re.sub(r"<https://jira\.example/browse/GOV-1\|GOV-1>", "", text).count("<") == 0
            assert "&" not in re.sub(r"&(amp|lt|gt);", "", text)


def test_teams_shows_the_actor_and_monte_carlos_text_without_links_or_emphasis() -> None:
    for card in (teams_card(_tag_change()), teams_card(_incident_change())):
        texts = [t for t in _texts(card["body"]) if "click" in t]
        assert texts, card
        for text in texts:
            assert "[click](" not in text and "**urgent**" not in text and "<b>" not in text
            assert r"\[click\]\(https://evil.example\)" in text and r"\*\*urgent\*\*" in text


def test_teams_escapes_list_starts_and_keeps_plain_urns_readable() -> None:
    assert md("- not a list\n2. nor this") == "\\- not a list\n2\\. nor this"
    assert md(URN) == URN


def test_jira_adf_carries_event_text_as_plain_text_nodes() -> None:
    incident = _incident_change()
    found = incident_of(incident)
    assert found is not None
    for doc in (jira_description(_tag_change()), jira_incident_description(incident, found)):
        dumped = json.dumps(doc)
        assert EVIL.split(" ")[0] in dumped  # present as text...
        links = [m for node in _nodes(doc) for m in node.get("marks", []) if m.get("type") == "link"]
        assert all("evil.example" not in json.dumps(m) for m in links)  # ...never as a link


def _nodes(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, dict):
        return [value, *(n for v in value.values() for n in _nodes(v))]
    if isinstance(value, list):
        return [n for v in value for n in _nodes(v)]
    return []


def test_freshdesk_html_escapes_event_text() -> None:
    incident = _incident_change()
    found = incident_of(incident)
    assert found is not None
    for html in (tag_description(_tag_change(), None), incident_description(incident, found, None)):
        assert "<b>x</b>" not in html and "&lt;b&gt;x&lt;/b&gt;" in html
        assert 'href="https://evil.example' not in html
