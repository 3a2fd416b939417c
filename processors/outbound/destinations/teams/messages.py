"""The Adaptive Card (schema 1.4) for a change, in the message envelope Teams Workflows and incoming webhooks take,
built purely.

``TextBlock`` texts and ``FactSet`` values render a subset of Markdown in Teams (``**bold**``, ``_italic_``,
``[text](url)`` links, lists). Every value from an event (asset and tag names, the actor, downstream URNs, what Monte
Carlo sent) is escaped with backslashes (CommonMark's escapes, which Teams honours) before it is placed, so an actor
``[click](https://evil)`` shows as written instead of a disguised link; the only Markdown is the card's own (its
lists). Links are ``Action.OpenUrl`` buttons with URLs the runtime built or checked (:func:`web_link`)."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from catalog.changes import Change
from processors.outbound.destinations.common import (
    Incident,
    applied_by,
    asset_link,
    cut,
    downstream,
    headline,
    impact_lines,
    incident_headline,
    incident_of,
    web_link,
)

if TYPE_CHECKING:
    from processors.outbound.runtime.catalog import Impact

CARD_VERSION = "1.4"
CARD_SCHEMA = "http://adaptivecards.io/schemas/adaptive-card.json"
CARD_CONTENT_TYPE = "application/vnd.microsoft.card.adaptive"
# Teams refuses messages over ~28 KB; the texts are cut well below that.
TEXT_MAX = 2000
DOWNSTREAM_LIST_MAX = 10
# Characters that open Markdown inline markup (emphasis, code, links, images, autolinks, HTML, headings, tables).
_INLINE = re.compile(r"([\\`*_~\[\]()<>#|!])")
# A line that would start a list (``- x``, ``+ x``, ``1. x``, ``1) x``).
_LINE_START = re.compile(r"^(\s*)(\d*)([-+.)])", re.MULTILINE)


def md(value: object) -> str:
    """``value`` as literal text in a Teams ``TextBlock`` or ``FactSet``: every Markdown character escaped."""
    return _LINE_START.sub(r"\1\2\\\3", _INLINE.sub(r"\\\1", str(value)))


def _text(text: str, **style: Any) -> dict[str, Any]:  # noqa: ANN401
    return {"type": "TextBlock", "text": cut(text, TEXT_MAX), "wrap": True, **style}


def _facts(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    # Values come from events: escaped (titles are ours).
    return {"type": "FactSet", "facts": [{"title": t, "value": cut(md(v), TEXT_MAX)} for t, v in pairs]}


def _incident_body(incident: Incident, impact: Impact | None) -> list[dict[str, Any]]:
    facts = [("Asset", incident.asset), ("Status", incident.status), ("Incident", incident.incident_id)]
    for title, value in (
        ("Type", incident.incident_type),
        ("Severity", incident.severity),
        ("Owner", incident.owner),
    ):
        if value:
            facts.append((title, value))
    body = [_text(md(incident_headline(incident)), size="Medium", weight="Bolder"), _facts(facts)]
    if incident.summary:
        body.append(_text(md(incident.summary)))
    if impact is not None:
        # Owners go into a fact (escaped there); the downstream URNs into the card's own list, escaped here.
        downstream_urns = [md(u) for u in impact.downstream]
        owners, reach, *listed = impact_lines(impact.owners, downstream_urns, impact.truncated, DOWNSTREAM_LIST_MAX)
        body.append(_facts([("Owners", owners.removeprefix("Owners: "))]))
        body.append(_text("\n\n".join([reach, "\n".join(listed)]) if listed else reach))
    return body


def _tag_body(change: Change) -> list[dict[str, Any]]:
    facts = [("Asset", change.asset or ""), ("Tag", change.tag or "")]
    if change.kind.startswith("classification."):
        facts.append(("Applied by", applied_by(change)))
    body = [_text(md(headline(change)), size="Medium", weight="Bolder"), _facts(facts)]
    if change.kind == "propagation.completed":
        added, _, reached = downstream(change)
        listed = [f"- {md(u)}" for u in added[:DOWNSTREAM_LIST_MAX]]
        if len(added) > DOWNSTREAM_LIST_MAX:
            listed.append(f"- … and {len(added) - DOWNSTREAM_LIST_MAX} more")
        body.append(_text(f"Newly reached ({reached} downstream):\n\n" + ("\n".join(listed) or "none")))
    return body


def teams_card(change: Change, catalog_url: str | None = None, impact: Impact | None = None) -> dict[str, Any]:
    """The Adaptive Card itself (the ``content`` of the attachment); ``impact``: an incident's owners and reach."""
    incident = incident_of(change)
    body = _incident_body(incident, impact) if incident is not None else _tag_body(change)
    body.append(_text(md(f"{change.kind} · change {change.id}"), isSubtle=True, size="Small", spacing="Small"))
    actions = []
    link = asset_link(catalog_url, change.tenant, change.asset or "") if change.asset else None
    monte_carlo = web_link(incident.url) if incident is not None else None
    if monte_carlo:
        actions.append({"type": "Action.OpenUrl", "title": "Open in Monte Carlo", "url": monte_carlo})
    if link:
        actions.append({"type": "Action.OpenUrl", "title": "Open in metalake", "url": link})
    card: dict[str, Any] = {"type": "AdaptiveCard", "$schema": CARD_SCHEMA, "version": CARD_VERSION, "body": body}
    if actions:
        card["actions"] = actions
    # Teams renders the card at full width instead of a narrow bubble.
    card["msteams"] = {"width": "Full"}
    return card


def teams_message(change: Change, catalog_url: str | None = None, impact: Impact | None = None) -> dict[str, Any]:
    """The POST body: one message with one Adaptive Card attachment (``contentUrl`` null, as Teams expects)."""
    return {
        "type": "message",
        "attachments": [
            {"contentType": CARD_CONTENT_TYPE, "contentUrl": None, "content": teams_card(change, catalog_url, impact)}
        ],
    }
