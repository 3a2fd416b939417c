"""What the destinations people read (Slack, Jira) share: how a change is described, and reading vendor answers.

Texts name assets and tags (which the tenant's own catalog holds) and counts; they never carry state values. Each
vendor's format is built in its folder (``slack/messages.py``: Block Kit, ``jira/messages.py``: ADF).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from metalake.events.changes import Change


def cut(text: str, limit: int) -> str:
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


def mapping_get(value: Any, *path: str) -> Any:
    for name in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(name)
    return value
