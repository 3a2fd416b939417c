"""Slack's Block Kit messages for a change, built purely (limits respected: a section's fields are at most 10, each
text at most 3000 characters)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from metalake.events.changes import Change
from processors.outbound.destinations.common import applied_by, cut, downstream, headline

SECTION_TEXT_MAX = 3000


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


def jira_link_message(key: str, url: str, dedup_key: str, change: Change) -> dict[str, Any]:
    text = f"Jira issue {key} opened for {change.tag} on {change.asset}"
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
