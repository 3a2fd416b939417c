"""The MongoDB projection of current asset state: version-guarded upserts, so stale or repeated events are no-ops.

Only operations real MongoDB and FerretDB both have: no transactions, no change streams, no TTL indexes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pymongo import UpdateOne
from pymongo.collection import Collection
from pymongo.errors import BulkWriteError

DUPLICATE_KEY = 11000


def guarded_upsert(urn: str, version: int, event_id: str, fields: Mapping[str, Any]) -> UpdateOne:
    """Set ``fields`` on the asset only if (version, event_id) is newer than what the document holds.

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
    return UpdateOne({"_id": urn, **newer}, {"$set": doc}, upsert=True)


def apply_upserts(collection: Collection[dict[str, Any]], ops: Iterable[UpdateOne]) -> tuple[int, int]:
    """Run the upserts; return (applied, stale). Raises on any error other than the stale signal."""
    batch = list(ops)
    if not batch:
        return 0, 0
    try:
        result = collection.bulk_write(batch, ordered=False)
    except BulkWriteError as exc:
        errors = exc.details.get("writeErrors", [])
        others = [e for e in errors if e.get("code") != DUPLICATE_KEY]
        if others:
            raise
        stale = len(errors)
        return len(batch) - stale, stale
    return result.upserted_count + result.modified_count + (result.matched_count - result.modified_count), 0
