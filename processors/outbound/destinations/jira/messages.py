"""Jira's Atlassian Document Format (ADF) bodies and summaries for a change, built purely."""

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

JIRA_SUMMARY_MAX = 255
DOWNSTREAM_LIST_MAX = 50


def _paragraph(text: str) -> dict[str, Any]:
    return {"type": "paragraph", "content": [{"type": "text", "text": text}]}


def _bullets(items: Sequence[str]) -> dict[str, Any]:
    return {"type": "bulletList", "content": [{"type": "listItem", "content": [_paragraph(i)]} for i in items]}


def adf(paragraphs: Sequence[str], items: Sequence[str] = ()) -> dict[str, Any]:
    content = [_paragraph(p) for p in paragraphs]
    if items:
        content.append(_bullets(items))
    return {"type": "doc", "version": 1, "content": content}


def downstream_items(change: Change) -> list[str]:
    if change.kind != "propagation.completed":
        return []
    added, _, _ = downstream(change)
    items = added[:DOWNSTREAM_LIST_MAX]
    if len(added) > DOWNSTREAM_LIST_MAX:
        items.append(f"… and {len(added) - DOWNSTREAM_LIST_MAX} more")
    return items


def jira_summary(change: Change) -> str:
    return cut(f"[{change.tag}] {change.asset} tagged {change.tag}: review downstream assets", JIRA_SUMMARY_MAX)


def jira_description(change: Change) -> dict[str, Any]:
    lines = [f"{change.asset} was tagged {change.tag} by {applied_by(change)}."]
    if change.kind == "propagation.completed":
        lines = [headline(change)]
    lines.append(f"Reported by metalake for tenant {change.tenant} (change {change.id}).")
    return adf(lines, downstream_items(change))


def jira_comment(change: Change, marker: str) -> dict[str, Any]:
    # The marker lets an interrupted attempt find its own comment instead of adding a second one.
    return adf([headline(change), f"[metalake {marker}]"], downstream_items(change))


def _link(text: str, url: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "marks": [{"type": "link", "attrs": {"href": url}}]}


def _incident_facts(incident: Incident) -> list[str]:
    facts = [f"Status: {incident.status}"]
    for title, value in (
        ("Type", incident.incident_type),
        ("Severity", incident.severity),
        ("Owner", incident.owner),
    ):
        if value:
            facts.append(f"{title}: {value}")
    return facts


def jira_incident_summary(incident: Incident) -> str:
    about = f": {incident.summary}" if incident.summary else ""
    return cut(f"[Incident] {incident.asset}{about}", JIRA_SUMMARY_MAX)


def jira_incident_description(
    change: Change, incident: Incident, impact: Impact | None = None, catalog_url: str | None = None
) -> dict[str, Any]:
    """The issue of a Monte Carlo incident: what Monte Carlo sent, the asset's owners and the assets downstream of it
    (at most ``DOWNSTREAM_LIST_MAX`` listed), and links to Monte Carlo and the asset in the catalog."""
    content: list[dict[str, Any]] = [
        _paragraph(f"{incident_headline(incident)} (incident {incident.incident_id})."),
        _bullets(_incident_facts(incident)),
    ]
    if incident.summary:
        content.append(_paragraph(cut(incident.summary, 32_000)))
    if impact is not None:
        owners, reach, *listed = impact_lines(impact.owners, impact.downstream, impact.truncated, DOWNSTREAM_LIST_MAX)
        content += [_paragraph(owners), _paragraph(reach)]
        if listed:
            content.append(_bullets([line.removeprefix("- ") for line in listed]))
    targets = [
        ("Open in Monte Carlo", web_link(incident.url)),
        ("Open in metalake", asset_link(catalog_url, change.tenant, incident.asset)),
    ]
    links: list[dict[str, Any]] = []
    for text, url in targets:
        if url:
            links += [{"type": "text", "text": " · "}, _link(text, url)] if links else [_link(text, url)]
    if links:
        content.append({"type": "paragraph", "content": links})
    content.append(_paragraph(f"Reported by metalake for tenant {change.tenant} (change {change.id})."))
    return {"type": "doc", "version": 1, "content": content}


def jira_incident_comment(incident: Incident, marker: str) -> dict[str, Any]:
    # The marker lets an interrupted attempt find its own comment instead of adding a second one.
    lines = [incident_headline(incident), *_incident_facts(incident)]
    if incident.summary:
        lines.append(cut(incident.summary, 32_000))
    return adf([*lines, f"[metalake {marker}]"])
