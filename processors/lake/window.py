"""The recent window of the MongoDB projection: which incident documents are old enough to leave it. Pure.

MongoDB keeps the current state of every asset, classification and edge, but only recent incident history: a
resolved incident whose last update is older than the window leaves MongoDB (Delta keeps it). ``prune`` deletes them
and ``reconcile`` must not bring them back, so both use this one definition.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any

DEFAULT_DAYS = 30
RESOLVED = "resolved"


def cutoff(now: datetime, days: int) -> datetime:
    """The oldest ``updated_at`` still inside the window. ``days`` must be >= 0."""
    if days < 0:
        raise ValueError("the window must be 0 days or more")
    return now - timedelta(days=days)


def prune_filter(before: datetime) -> dict[str, Any]:
    """The MongoDB filter of incident documents outside the window: resolved and last updated before ``before``."""
    return {"status": RESOLVED, "updated_at": {"$lt": before}}


def outside_window(row: Mapping[str, Any], before: datetime) -> bool:
    """True when an incident row (from Delta) is one ``prune_filter`` would delete."""
    updated = row.get("updated_at")
    if row.get("status") != RESOLVED or not isinstance(updated, datetime):
        return False
    if updated.tzinfo is None:  # MongoDB and our Delta reads give UTC; a naive value is UTC by convention
        updated = updated.replace(tzinfo=UTC)
    return updated < before
