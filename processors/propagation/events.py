"""The events a propagation run publishes: propagated/unpropagated tags into the tenant's priority topic, then one
``io.metalake.propagation.completed.v1`` per changed origin to ``metalake.changes``. Ids are deterministic."""

from __future__ import annotations

import hashlib
import uuid

from catalog.changes import changes_key
from catalog.propagation.diff import PROPAGATED_TYPE, UNPROPAGATED_TYPE, Plan
from catalog.propagation.model import Propagated
from metalake.events import CloudEvent, new_event

COMPLETED_TYPE = "io.metalake.propagation.completed.v1"
SOURCE = "/processors/propagation"
LISTED = 5000  # URNs per list in a completed event: a Kafka record stays well under 1 MB
_NAMESPACE = uuid.UUID("9d2a4b61-3c7e-4f0a-8e15-2b6c7d8e9f01")


def tag_event(tenant: str, row: Propagated) -> CloudEvent:
    """The event of one propagated row (a tombstone is an unpropagation); its id and version are the row's."""
    data = {
        "urn": row.urn,
        "version": row.stamp[0],
        "tag": row.tag,
        "origin": row.origin,
        "path": list(row.path),
        "depth": row.depth,
    }
    event_type = UNPROPAGATED_TYPE if row.deleted else PROPAGATED_TYPE
    return new_event(event_type, tenant, data, source=SOURCE, event_id=row.stamp[1])


def completed_event(plan: Plan, version: int) -> CloudEvent:
    """What one run of (origin, tag) changed. The id hashes the rows published, so a replay that publishes the same
    rows publishes the same completed event."""
    added = sorted(r.urn for r in plan.added)
    removed = sorted(r.urn for r in plan.removed)
    digest = hashlib.sha256()
    for row in (*plan.added, *plan.removed):
        digest.update(row.stamp[1].encode())
    event_id = uuid.uuid5(_NAMESPACE, f"{plan.tenant}|{plan.origin}|{plan.tag}|{version}|{digest.hexdigest()}")
    data = {
        "urn": plan.origin,
        "version": version,
        "origin": plan.origin,
        "tag": plan.tag,
        "added": added[:LISTED],
        "removed": removed[:LISTED],
        "added_count": len(added),
        "removed_count": len(removed),
        "reached": plan.reached,
        "max_depth": plan.max_depth,
        "truncated": plan.truncated,
        "reason": plan.reason,
    }
    return new_event(
        COMPLETED_TYPE, plan.tenant, data, source=SOURCE, event_id=str(event_id), partitionkey=changes_key(plan.tenant)
    )
