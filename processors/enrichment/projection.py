"""The MongoDB projection of current asset state: version-guarded upserts, so stale or repeated events are no-ops.

Only operations real MongoDB and FerretDB both have: no transactions, no change streams, no TTL indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pymongo.collection import Collection
from pymongo.errors import OperationFailure

DUPLICATE_KEY = 11000


def guarded_upsert(urn: str, version: int, event_id: str, fields: Mapping[str, Any]) -> dict[str, Any]:
    """An ``update`` statement that sets ``fields`` only if (version, event_id) is newer than the document's.

    When the document is newer, the filter matches nothing and the upsert's insert hits the unique ``_id``:
    that duplicate-key error is the "stale, skip" signal.
    """
    newer = {
        "$or": [
            {"version": {"$lt": version}},
            {"version": version, "event_id": {"$lt": event_id}},
        ]
    }
    doc = {k: v for k, v in fields.items() if v is not None}
    doc.update({"version": version, "event_id": event_id})
    return {"q": {"_id": urn, **newer}, "u": {"$set": doc}, "upsert": True}


def apply_upserts(
    collection: Collection[dict[str, Any]], ops: Iterable[dict[str, Any]], chunk: int = 1000
) -> tuple[int, int]:
    """Run the upserts unordered; return (applied, stale). Raises on any write error other than the stale signal.

    Sent as raw ``update`` commands rather than ``bulk_write``: FerretDB leaves ``nModified`` out of a reply that
    carries write errors, and pymongo's bulk result merging fails on that reply.
    """
    applied = stale = 0
    batch = list(ops)
    for start in range(0, len(batch), chunk):
        part = batch[start : start + chunk]
        reply = collection.database.command({"update": collection.name, "updates": part, "ordered": False})
        errors = reply.get("writeErrors", [])
        others = [e for e in errors if e.get("code") != DUPLICATE_KEY]
        if others:
            first = others[0]
            raise OperationFailure(f"MongoDB upsert failed: {first.get('errmsg')}", first.get("code"), reply)
        stale += len(errors)
        applied += len(part) - len(errors)
    return applied, stale
