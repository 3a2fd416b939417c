"""Jira's Atlassian Document Format (ADF) bodies and summaries for a change, built purely."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metalake.events.changes import Change
from processors.outbound.destinations.common import applied_by, cut, downstream, headline

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
