"""Committed changes for the outbound runtime: one record per state row a batch wrote, on ``metalake.changes``.

Published after Delta and MongoDB, before the batch returns (so before Spark commits the offsets). A replayed batch
publishes its changes again: ids are deterministic (table, key, version, event id), so consumers deduplicate.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from catalog.changes import StateChange
from metalake.events import CloudEvent, new_event
from processors.enrichment.classify import Rule, classify
from processors.enrichment.state import StateSpec

SOURCE = "/processors/enrichment"
CLASSIFIER = "/processors/enrichment/classifier"
_NAMESPACE = uuid.UUID("6f1c3c0e-5f7a-4a55-9d2e-1e0f0b6c2a71")


def change_events(
    tenant: str, spec: StateSpec, rows: Sequence[Mapping[str, Any]], traces: Mapping[str, str] | None = None
) -> list[CloudEvent]:
    """One change per folded row; ``traces`` (event id -> ``traceparent``) puts each in its event's trace."""
    out = []
    for row in rows:
        doc_id = spec.mongo_id(row)
        event_id = uuid.uuid5(_NAMESPACE, f"{tenant}|{spec.table}|{doc_id}|{row['version']}|{row['event_id']}")
        change = StateChange(
            id=str(event_id),
            source=SOURCE,
            tenant=tenant,
            traceparent=traces.get(row["event_id"]) if traces else None,
            table=spec.table,
            key={k: row[k] for k in spec.key},
            deleted=row["deleted"],
            version=row["version"],
            event_id=row["event_id"],
            state={c: row[c] for c in spec.fields},
        )
        out.append(change.event())
    return out


def auto_classifications(
    tenant: str, assets: Sequence[Mapping[str, Any]], rules: Sequence[Rule], dictionary: Sequence[str]
) -> list[CloudEvent]:
    """Classification events for the live columns among ``assets`` (folded asset rows) that a rule tags.

    The event's version is the column's own, and its id is derived from (tenant, column, tag, version): a replayed
    batch publishes the same events, and a column seen again at the same version is not tagged twice.
    """
    out = []
    for row in assets:
        if row.get("kind") != "column" or row.get("deleted") or not row.get("name"):
            continue
        for match in classify(str(row["name"]), row.get("data_type"), rules, dictionary):
            event_id = uuid.uuid5(_NAMESPACE, f"auto|{tenant}|{row['urn']}|{match.tag}|{row['version']}")
            data = {
                "urn": row["urn"],
                "version": row["version"],
                "tag": match.tag,
                "source": "auto",
                "propagate": True,
                "confidence": match.confidence,
                "rule": match.rule,
            }
            out.append(
                new_event(
                    "io.metalake.classification.added.v1", tenant, data, source=CLASSIFIER, event_id=str(event_id)
                )
            )
    return out
