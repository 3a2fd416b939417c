"""Slack's Block Kit messages for a change, built purely (limits respected: a section's fields are at most 10, each
text at most 3000 characters).

Every value from an event (asset and tag names, the actor, downstream URNs, what Monte Carlo sent) goes into
``mrkdwn`` texts and the notification ``text`` escaped as Slack requires (``&``, ``<``, ``>``): ``<!channel>`` or a
disguised ``<https://evil|click>`` in an actor shows as written instead of notifying a channel or linking.
``plain_text`` (headers, button titles) is not parsed by Slack and is left as is."""

from __future__ import annotations

from collections.abc import Sequence
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
    web_link,
)

if TYPE_CHECKING:
    from processors.outbound.runtime.catalog import Impact

SECTION_TEXT_MAX = 3000
_MRKDWN_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;"})
# Slack's limits: a section field's text, a header's plain text.
FIELD_TEXT_MAX = 2000
HEADER_MAX = 150
IMPACT_LIST_MAX = 5


def mrkdwn(text: object) -> str:
    """``text`` as literal characters in Slack ``mrkdwn`` (and in a message's ``text``): no mention, no link."""
    return str(text).translate(_MRKDWN_ESCAPES)


def slack_message(change: Change, dedup_key: str, jira_links: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """Arguments of chat.postMessage (without channel/thread_ts): text fallback, blocks and metadata."""
    text = headline(change)
    fields = [
        {"type": "mrkdwn", "text": cut(f"*Asset*\n`{mrkdwn(change.asset)}`", SECTION_TEXT_MAX)},
        {"type": "mrkdwn", "text": cut(f"*Tag*\n{mrkdwn(change.tag)}", SECTION_TEXT_MAX)},
    ]
    if change.kind.startswith("classification."):
        fields.append({"type": "mrkdwn", "text": cut(f"*Applied by*\n{mrkdwn(applied_by(change))}", SECTION_TEXT_MAX)})
    if change.kind == "propagation.completed":
        added, _, reached = downstream(change)
        listed = "\n".join(f"• `{mrkdwn(u)}`" for u in added[:10]) or "none"
        fields.append({"type": "mrkdwn", "text": cut(f"*Propagated to*\n{reached} downstream", SECTION_TEXT_MAX)})
        fields.append({"type": "mrkdwn", "text": cut(f"*Newly reached*\n{listed}", SECTION_TEXT_MAX)})
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": cut(text, 150)}},
        {"type": "section", "fields": fields[:10]},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": mrkdwn(f"{change.kind} · change {change.id}")}],
        },
    ]
    if jira_links:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": f"Open {key}"}, "url": url}
                    for key, url in jira_links[:5]
                ],
            }
        )
    return {
        "text": mrkdwn(text),
        "blocks": blocks,
        "metadata": {
            "event_type": "metalake_" + change.kind.replace(".", "_"),
            "event_payload": {
                "tenant": change.tenant,
                "asset": change.asset or "",
                "tag": change.tag or "",
                "change_id": change.id,
                "dedup_key": dedup_key,
            },
        },
    }


def jira_link_message(key: str, url: str, dedup_key: str, change: Change, about: str | None = None) -> dict[str, Any]:
    """A thread reply linking a Jira issue; ``about`` names what it was opened for (default: the change's tag)."""
    text = mrkdwn(f"Jira issue {key} opened for {about or change.tag} on {change.asset}")
    # The link's URL and label are Jira's answer and the tenant's server: escaped, and no "|" to end the URL early.
    link = f"<{mrkdwn(url).replace('|', '%7C')}|{mrkdwn(key)}>"
    return {
        "text": text,
        "blocks": [{"type": "section", "text": {"type": "mrkdwn", "text": cut(f":ticket: {link} {text}", 3000)}}],
        "metadata": {
            "event_type": "metalake_jira_linked",
            "event_payload": {"tenant": change.tenant, "issue": key, "dedup_key": dedup_key},
        },
    }


def _field(title: str, value: str) -> dict[str, str]:
    """A field whose ``value`` is escaped here (titles are ours)."""
    return {"type": "mrkdwn", "text": cut(f"*{title}*\n{mrkdwn(value)}", FIELD_TEXT_MAX)}


def slack_incident_message(  # noqa: PLR0913
    change: Change,
    incident: Incident,
    dedup_key: str,
    *,
    opening: bool,
    impact: Impact | None = None,
    catalog_url: str | None = None,
    jira_links: Sequence[tuple[str, str]] = (),
) -> dict[str, Any]:
    """chat.postMessage arguments for a Monte Carlo incident change: ``opening`` (the thread's first message) with
    every field Monte Carlo sent plus the asset's owners and downstream impact; otherwise the reply an update or the
    resolution is (status, severity, summary)."""
    text = incident_headline(incident)
    fields = [_field("Status", incident.status)]
    if opening:
        fields.insert(0, _field("Asset", f"`{incident.asset}`"))  # the backticks go through the escape unchanged
        fields.append(_field("Incident", incident.incident_id))
        for title, value in (("Type", incident.incident_type), ("Owner", incident.owner)):
            if value:
                fields.append(_field(title, value))
    if incident.severity:
        fields.append(_field("Severity", incident.severity))
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": cut(text, HEADER_MAX)}},
        {"type": "section", "fields": fields[:10]},
    ]
    if incident.summary:
        summary = cut(mrkdwn(incident.summary), SECTION_TEXT_MAX)
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": summary}})
    if opening and impact is not None:
        owners, reach, *listed = impact_lines(impact.owners, impact.downstream, impact.truncated, IMPACT_LIST_MAX)
        blocks.append(
            {
                "type": "section",
                "fields": [
                    _field("Asset owners", owners.removeprefix("Owners: ")),
                    _field("Downstream impact", "\n".join([reach.removeprefix("Downstream impact: "), *listed])),
                ],
            }
        )
    context = mrkdwn(f"{change.kind} · change {change.id}")
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": context}]})
    buttons = []
    monte_carlo = web_link(incident.url)
    if monte_carlo:
        buttons.append(("Open in Monte Carlo", monte_carlo))
    link = asset_link(catalog_url, change.tenant, incident.asset) if opening else None
    if link:
        buttons.append(("Open in metalake", link))
    buttons += [(f"Open {key}", url) for key, url in jira_links[:3]]
    if buttons:
        blocks.append(
            {
                "type": "actions",
                "elements": [
                    {"type": "button", "text": {"type": "plain_text", "text": cut(title, 75)}, "url": url}
                    for title, url in buttons
                ],
            }
        )
    return {
        "text": mrkdwn(text),
        "blocks": blocks,
        "metadata": {
            "event_type": "metalake_incident_" + "".join(c if c.isalnum() else "_" for c in incident.status),
            "event_payload": {
                "tenant": change.tenant,
                "asset": incident.asset,
                "incident_id": incident.incident_id,
                "change_id": change.id,
                "dedup_key": dedup_key,
            },
        },
    }
