"""Slack's Block Kit messages for a change, built purely (limits respected: a section's fields are at most 10, each
text at most 3000 characters)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from metalake.events.changes import Change
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
# Slack's limits: a section field's text, a header's plain text.
FIELD_TEXT_MAX = 2000
HEADER_MAX = 150
IMPACT_LIST_MAX = 5


def slack_message(change: Change, dedup_key: str, jira_links: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """Arguments of chat.postMessage (without channel/thread_ts): text fallback, blocks and metadata."""
    text = headline(change)
    fields = [
        {"type": "mrkdwn", "text": cut(f"*Asset*\n`{change.asset}`", SECTION_TEXT_MAX)},
        {"type": "mrkdwn", "text": cut(f"*Tag*\n{change.tag}", SECTION_TEXT_MAX)},
    ]
    if change.kind.startswith("classification."):
        fields.append({"type": "mrkdwn", "text": cut(f"*Applied by*\n{applied_by(change)}", SECTION_TEXT_MAX)})
    if change.kind == "propagation.completed":
        added, _, reached = downstream(change)
        listed = "\n".join(f"• `{u}`" for u in added[:10]) or "none"
        fields.append({"type": "mrkdwn", "text": cut(f"*Propagated to*\n{reached} downstream", SECTION_TEXT_MAX)})
        fields.append({"type": "mrkdwn", "text": cut(f"*Newly reached*\n{listed}", SECTION_TEXT_MAX)})
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": cut(text, 150)}},
        {"type": "section", "fields": fields[:10]},
        {
            "type": "context",
            "elements": [{"type": "mrkdwn", "text": f"{change.kind} · change {change.id}"}],
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
        "text": text,
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
    text = f"Jira issue {key} opened for {about or change.tag} on {change.asset}"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": cut(f":ticket: <{url}|{key}> {text}", 3000)}}
        ],
        "metadata": {
            "event_type": "metalake_jira_linked",
            "event_payload": {"tenant": change.tenant, "issue": key, "dedup_key": dedup_key},
        },
    }


def _field(title: str, value: str) -> dict[str, str]:
    return {"type": "mrkdwn", "text": cut(f"*{title}*\n{value}", FIELD_TEXT_MAX)}


def slack_incident_message(
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
        fields.insert(0, _field("Asset", f"`{incident.asset}`"))
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
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": cut(incident.summary, SECTION_TEXT_MAX)}})
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
    blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": f"{change.kind} · change {change.id}"}]})
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
        "text": text,
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
