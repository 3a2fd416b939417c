"""What Slack and Jira are told about a change: Block Kit messages and Atlassian Document Format, built purely.

Texts name assets and tags (which the tenant's own catalog holds) and counts; they never carry state values.
Slack limits respected: a section's fields are at most 10 and each text at most 3000 characters.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from metalake.events.changes import Change

SECTION_TEXT_MAX = 3000
JIRA_SUMMARY_MAX = 255
DOWNSTREAM_LIST_MAX = 50


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def downstream(change: Change) -> tuple[list[str], list[str], int]:
    """(added, removed, reached) of a propagation.completed change."""
    added = [str(u) for u in change.data.get("added") or []]
    removed = [str(u) for u in change.data.get("removed") or []]
    reached = change.data.get("reached")
    return added, removed, int(reached) if isinstance(reached, int) else len(added)


def worth_telling(change: Change) -> bool:
    """False for a propagation run that neither added nor removed anything (people have nothing new to read)."""
    if change.kind != "propagation.completed":
        return True
    added, removed, _ = downstream(change)
    return bool(added or removed)


def applied_by(change: Change) -> str:
    state = change.state
    actor, source = state.get("actor"), state.get("source")
    if isinstance(actor, str) and actor:
        return actor
    if source == "auto":
        confidence = state.get("confidence")
        return f"auto-classifier (confidence {confidence})" if confidence is not None else "auto-classifier"
    return str(source or "unknown")


def headline(change: Change) -> str:
    asset, tag = change.asset or "(unknown asset)", change.tag or "(tag)"
    kind = change.kind
    if kind == "classification.added":
        return f"{tag} tag added to {asset}"
    if kind == "classification.removed":
        return f"{tag} tag removed from {asset}"
    if kind == "propagation.completed":
        added, removed, reached = downstream(change)
        truncated = " (truncated)" if change.data.get("truncated") else ""
        return (
            f"{tag} on {asset} propagated to {reached} downstream asset(s){truncated}: "
            f"+{len(added)} added, -{len(removed)} removed"
        )
    if kind == "tag.propagated":
        return f"{tag} tag propagated to {asset}"
    if kind == "tag.unpropagated":
        return f"{tag} tag no longer propagated to {asset}"
    return f"{kind} on {asset}"


def slack_message(change: Change, dedup_key: str, jira_links: Sequence[tuple[str, str]] = ()) -> dict[str, Any]:
    """Arguments of chat.postMessage (without channel/thread_ts): text fallback, blocks and metadata."""
    text = headline(change)
    fields = [
        {"type": "mrkdwn", "text": _cut(f"*Asset*\n`{change.asset}`", SECTION_TEXT_MAX)},
        {"type": "mrkdwn", "text": _cut(f"*Tag*\n{change.tag}", SECTION_TEXT_MAX)},
    ]
    if change.kind.startswith("classification."):
        fields.append({"type": "mrkdwn", "text": _cut(f"*Applied by*\n{applied_by(change)}", SECTION_TEXT_MAX)})
    if change.kind == "propagation.completed":
        added, _, reached = downstream(change)
        listed = "\n".join(f"• `{u}`" for u in added[:10]) or "none"
        fields.append({"type": "mrkdwn", "text": _cut(f"*Propagated to*\n{reached} downstream", SECTION_TEXT_MAX)})
        fields.append({"type": "mrkdwn", "text": _cut(f"*Newly reached*\n{listed}", SECTION_TEXT_MAX)})
    blocks: list[dict[str, Any]] = [
        {"type": "header", "text": {"type": "plain_text", "text": _cut(text, 150)}},
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


def jira_link_message(key: str, url: str, dedup_key: str, change: Change) -> dict[str, Any]:
    text = f"Jira issue {key} opened for {change.tag} on {change.asset}"
    return {
        "text": text,
        "blocks": [
            {"type": "section", "text": {"type": "mrkdwn", "text": _cut(f":ticket: <{url}|{key}> {text}", 3000)}}
        ],
        "metadata": {
            "event_type": "metalake_jira_linked",
            "event_payload": {"tenant": change.tenant, "issue": key, "dedup_key": dedup_key},
        },
    }


# -- Jira (Atlassian Document Format) ---------------------------------------------------------------------------------


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
    return _cut(f"[{change.tag}] {change.asset} tagged {change.tag}: review downstream assets", JIRA_SUMMARY_MAX)


def jira_description(change: Change) -> dict[str, Any]:
    lines = [f"{change.asset} was tagged {change.tag} by {applied_by(change)}."]
    if change.kind == "propagation.completed":
        lines = [headline(change)]
    lines.append(f"Reported by metalake for tenant {change.tenant} (change {change.id}).")
    return adf(lines, downstream_items(change))


def jira_comment(change: Change, marker: str) -> dict[str, Any]:
    # The marker lets an interrupted attempt find its own comment instead of adding a second one.
    return adf([headline(change), f"[metalake {marker}]"], downstream_items(change))


def mapping_get(value: Any, *path: str) -> Any:
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value
