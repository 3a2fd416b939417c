"""Folding a batch's asset events into one current-state row per URN. Pure Python, unit-tested without Spark."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from metalake.urn import AssetUrn, InvalidUrn
from processors.enrichment.parse import ParsedRow

UPSERTED = "io.metalake.asset.upserted.v1"
DELETED = "io.metalake.asset.deleted.v1"
ASSET_TYPES = frozenset({UPSERTED, DELETED})

# Fields an upsert may leave out: the asset keeps what it had (coalesce in Delta, $set of non-null in MongoDB).
CARRIED = ("kind", "name", "platform", "qualified_name", "description", "data_type", "owners", "properties")
ASSET_COLUMNS = (
    "urn",
    *CARRIED,
    "deleted",
    "version",
    "event_id",
    "event_time",
    "updated_at",
)


def _order(row: ParsedRow) -> tuple[int, str]:
    return (row.version or 0, row.event_id or "")


def fold_assets(rows: Iterable[ParsedRow], now: datetime) -> list[dict[str, Any]]:
    """One dict per URN (keys: ASSET_COLUMNS): the newest (version, event_id) wins, carried fields fold forward."""
    by_urn: dict[str, list[ParsedRow]] = {}
    for row in rows:
        if row.valid and row.event_type in ASSET_TYPES and row.subject:
            by_urn.setdefault(row.subject, []).append(row)
    out = []
    for urn, events in by_urn.items():
        events.sort(key=_order)
        state: dict[str, Any] = dict.fromkeys(CARRIED)
        try:
            parsed = AssetUrn.parse(urn)
            state["platform"], state["qualified_name"] = parsed.platform, parsed.qualified_name
        except InvalidUrn:
            pass  # the schema's pattern admits a few strings AssetUrn refuses; keep the row, without derived fields
        for event in events:
            if event.event_type == UPSERTED:
                data = json.loads(event.data or "{}")
                for key in ("kind", "name", "description", "data_type", "owners", "properties"):
                    if data.get(key) is not None:
                        state[key] = data[key]
        newest = events[-1]
        state.update(
            urn=urn,
            deleted=newest.event_type == DELETED,
            version=newest.version,
            event_id=newest.event_id,
            event_time=newest.event_time,
            updated_at=now,
        )
        out.append(state)
    return out
