"""Current-state tables: which events feed them, their key, and the batch fold (newest version wins).

One spec per kind of state (assets, classifications, lineage edges, incidents, propagated tags, asset edits) drives
the same three steps: fold the batch's events into one row per key, MERGE the rows into the tenant's Delta table,
upsert them into MongoDB. Pure Python here; Spark and MongoDB I/O live in ``lake`` and ``projection``. The MongoDB
documents a spec makes are typed in ``catalog.projection`` for their readers (a unit test keeps the two in step).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from catalog import projection
from metalake.urn import AssetUrn, InvalidUrn
from processors.enrichment.parse import ParsedRow

META = ("deleted", "version", "event_id", "event_time", "updated_at")


def _asset_derived(urn_data: Mapping[str, Any]) -> dict[str, Any]:
    try:
        parsed = AssetUrn.parse(str(urn_data["urn"]))
    except InvalidUrn:
        return {}  # the schema's pattern admits a few strings AssetUrn refuses: keep the row without derived fields
    return {"platform": parsed.platform, "qualified_name": parsed.qualified_name}


@dataclass(frozen=True)
class StateSpec:
    """How one kind of state is kept.

    ``types`` maps each feeding event type to True when it removes the row (a versioned tombstone, ``deleted``).
    ``carried`` fields may be left out by an event and keep their previous value; other fields are replaced by the
    newest non-removing event, null included (e.g. an incident's severity being unset).
    """

    table: str
    collection: str
    key: tuple[str, ...]
    types: Mapping[str, bool]
    fields: tuple[str, ...]
    carried: frozenset[str] = frozenset()
    derive: Callable[[Mapping[str, Any]], dict[str, Any]] | None = field(default=None, compare=False)
    # Rows whose ``source`` is "human" are never overwritten by a row whose source is "auto" (whatever the versions):
    # an automatic classifier must not undo a person's decision.
    protect_human: bool = False
    # MongoDB only (not a Delta column): the documents also carry ``catalog.urn_keys.FIELD``, the normalised URN of
    # their asset and its parent, which the OPA decisions look tags up by.
    urn_keys: bool = False

    @property
    def columns(self) -> tuple[str, ...]:
        return (*self.key, *self.fields, *META)

    def mongo_id(self, row: Mapping[str, Any]) -> str:
        # Components never hold "|": URNs are percent-encoded, tags and incident ids exclude it.
        return "|".join(str(row[k]) for k in self.key)


ASSETS = StateSpec(
    table="assets",
    collection=projection.ASSETS_COLLECTION,
    key=("urn",),
    types={"io.metalake.asset.upserted.v1": False, "io.metalake.asset.deleted.v1": True},
    fields=("kind", "name", "platform", "qualified_name", "description", "data_type", "owners", "properties"),
    carried=frozenset(
        {"kind", "name", "platform", "qualified_name", "description", "data_type", "owners", "properties"}
    ),
    derive=_asset_derived,
)
CLASSIFICATIONS = StateSpec(
    table="classifications",
    collection=projection.CLASSIFICATIONS_COLLECTION,
    key=("urn", "tag"),
    types={"io.metalake.classification.added.v1": False, "io.metalake.classification.removed.v1": True},
    fields=(
        "source",
        "propagate",
        "confidence",
        "rule",
        "actor",
        "remove_propagations_on_entity_delete",
        "restrict_propagation_through_lineage",
    ),
    protect_human=True,
    urn_keys=True,
)
LINEAGE = StateSpec(
    table="lineage_edges",
    collection=projection.LINEAGE_COLLECTION,
    key=("upstream", "urn"),
    types={"io.metalake.lineage.edge.added.v1": False, "io.metalake.lineage.edge.removed.v1": True},
    fields=("blocked_tags", "transformation", "propagation"),
)
INCIDENTS = StateSpec(
    table="incidents",
    collection=projection.INCIDENTS_COLLECTION,
    key=("incident_id", "urn"),
    types={
        "com.montecarlodata.incident.opened.v1": False,
        "com.montecarlodata.incident.updated.v1": False,
        "com.montecarlodata.incident.resolved.v1": False,
    },
    fields=("status", "incident_type", "webhook_type", "feedback", "severity", "owner", "url", "summary"),
)
# Tags that reached an asset along lineage, one row per (asset, tag, origin); written by processors.propagation.
PROPAGATED = StateSpec(
    table="propagated_tags",
    collection=projection.PROPAGATED_COLLECTION,
    key=("urn", "tag", "origin"),
    types={"io.metalake.classification.propagated.v1": False, "io.metalake.classification.unpropagated.v1": True},
    fields=("path", "depth"),
    urn_keys=True,
)
# A person's edits of an asset through the API, one row per (asset, aspect): "description", "owners" or
# "properties.<name>". Kept apart from the asset's row, with versions of their own, so a source's later upsert
# (whatever its version scheme) never overwrites an edit and an edit never makes the source's next upsert stale;
# clearing an edit is its tombstone. Readers lay the live edits over the asset (catalog.projection.apply_edits).
ASSET_EDITS = StateSpec(
    table="asset_edits",
    collection=projection.ASSET_EDITS_COLLECTION,
    key=("urn", "aspect"),
    types={"io.metalake.asset.edited.v1": False, "io.metalake.asset.edit.cleared.v1": True},
    fields=("text", "owners", "actor"),
)
STATE_SPECS: tuple[StateSpec, ...] = (ASSETS, CLASSIFICATIONS, LINEAGE, INCIDENTS, PROPAGATED, ASSET_EDITS)


def _order(item: tuple[ParsedRow, dict[str, Any]]) -> tuple[int, str]:
    row = item[0]
    return (row.version or 0, row.event_id or "")


def fold(spec: StateSpec, rows: Iterable[ParsedRow], now: datetime) -> list[dict[str, Any]]:
    """One row per key (keys: ``spec.columns``): the newest (version, event id) decides ``deleted`` and the meta
    columns; carried fields fold forward through the batch; other fields come from the newest non-removing event."""
    groups: dict[tuple[Any, ...], list[tuple[ParsedRow, dict[str, Any]]]] = {}
    for row in rows:
        if not row.valid or row.event_type not in spec.types:
            continue
        data = json.loads(row.data or "{}")
        key = tuple(data.get(k) for k in spec.key)
        if any(k is None for k in key):
            continue  # every schema requires its key fields; defensive against a schema that forgot one
        groups.setdefault(key, []).append((row, data))
    out = []
    for key, items in groups.items():
        items.sort(key=_order)
        state: dict[str, Any] = dict(zip(spec.key, key, strict=True))
        state.update(dict.fromkeys(spec.fields))
        last = items[0][0]
        for row, data in items:
            removal = spec.types[row.event_type or ""]
            if not removal and spec.protect_human and overrides_human(state.get("source"), data.get("source")):
                continue
            last = row
            if removal:
                continue  # a removal carries no values: the tombstone keeps the last ones
            values = {**data, **(spec.derive(data) if spec.derive else {})}
            for name in spec.fields:
                if name not in spec.carried or values.get(name) is not None:
                    state[name] = values.get(name)
        state.update(
            deleted=spec.types[last.event_type or ""],
            version=last.version,
            event_id=last.event_id,
            event_time=last.event_time,
            updated_at=now,
        )
        out.append(state)
    return out


def overrides_human(held_source: Any, incoming_source: Any) -> bool:  # noqa: ANN401
    """Whether an incoming row would overwrite a person's decision with an automatic one."""
    return bool(held_source == "human" and incoming_source == "auto")
