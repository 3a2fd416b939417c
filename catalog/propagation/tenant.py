"""One tenant's propagation state: lineage graph, assignments and propagated tags, and the plan of a recompute.

Fed with committed state rows (from MongoDB at bootstrap, then from ``metalake.changes``), each applied only if it
is newer than what is held. :meth:`TenantPropagation.apply` answers which origins a change may affect;
:meth:`TenantPropagation.plan` recomputes one origin's closure and diffs it with the propagated tags held.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from catalog.propagation.diff import Plan, plan_origin
from catalog.propagation.graph import DIRECTIONS, Direction, Edge, EdgeKey, Limits, LineageGraph
from catalog.propagation.model import Assignment, AssignmentKey, Propagated, PropagatedKey, Stamp, stamp

# Tables of metalake.changes this state follows (the table names of processors.enrichment.state).
ASSETS, CLASSIFICATIONS, LINEAGE, PROPAGATED = "assets", "classifications", "lineage_edges", "propagated_tags"


def direction_of(value: object) -> Direction:
    """An edge's ``propagation``; absent (older rows) or unknown means the default, downstream."""
    for direction in DIRECTIONS:
        if value == direction:
            return direction
    return "downstream"


def edge_from_row(row: Mapping[str, Any]) -> Edge:
    return Edge(
        upstream=str(row["upstream"]),
        urn=str(row["urn"]),
        propagation=direction_of(row.get("propagation")),
        blocked_tags=frozenset(str(t) for t in row.get("blocked_tags") or ()),
    )


@dataclass
class TenantPropagation:
    """Everything propagation needs to know about one tenant, in memory."""

    tenant: str
    limits: Limits = field(default_factory=Limits)
    graph: LineageGraph = field(default_factory=LineageGraph)
    edge_stamps: dict[EdgeKey, Stamp] = field(default_factory=dict)
    assignments: dict[AssignmentKey, Assignment] = field(default_factory=dict)
    tags_on: dict[str, set[str]] = field(default_factory=dict)  # urn -> tags assigned (live)
    asset_stamps: dict[str, Stamp] = field(default_factory=dict)
    deleted_assets: set[str] = field(default_factory=set)
    rows: dict[PropagatedKey, Propagated] = field(default_factory=dict)  # tombstones included
    by_origin: dict[AssignmentKey, dict[str, Propagated]] = field(default_factory=dict)  # live rows
    reached_by: dict[str, set[AssignmentKey]] = field(default_factory=dict)  # urn -> live origins reaching it

    # --- applying committed rows -------------------------------------------------------------------------------

    def apply(self, table: str, row: Mapping[str, Any]) -> set[AssignmentKey]:
        """Apply one committed state row (``key`` fields, ``deleted``, ``version``, ``event_id`` and the state
        fields, flat); return the origins whose closure may have changed. Stale rows change nothing."""
        if table == CLASSIFICATIONS:
            return self._apply_assignment(row)
        if table == LINEAGE:
            return self._apply_edge(row)
        if table == ASSETS:
            return self._apply_asset(row)
        if table == PROPAGATED:
            # Loop guard: a propagated tag is never an origin; its echo only updates what is held.
            self.put_propagated(Propagated.from_row(dict(row)))
        return set()

    def _apply_assignment(self, row: Mapping[str, Any]) -> set[AssignmentKey]:
        if row.get("source") == "propagated":
            return set()  # loop guard, also for a producer that wrote a propagated tag as a classification
        new = Assignment.from_row(dict(row))
        held = self.assignments.get(new.key)
        if held is not None and held.stamp >= new.stamp:
            return set()
        self.assignments[new.key] = new
        tags = self.tags_on.setdefault(new.urn, set())
        if new.deleted:
            tags.discard(new.tag)
        else:
            tags.add(new.tag)
        return {new.key}

    def _apply_edge(self, row: Mapping[str, Any]) -> set[AssignmentKey]:
        key = (str(row["upstream"]), str(row["urn"]))
        new = stamp(dict(row))
        if self.edge_stamps.get(key, (-1, "")) >= new:
            return set()
        self.edge_stamps[key] = new
        before = self.graph.get(key)
        if row.get("deleted"):
            self.graph.remove(key)
        else:
            self.graph.put(edge_from_row(row))
        if before == self.graph.get(key):
            return set()  # e.g. only the transformation text changed
        return self.touching(key)

    def _apply_asset(self, row: Mapping[str, Any]) -> set[AssignmentKey]:
        urn = str(row["urn"])
        new = stamp(dict(row))
        if self.asset_stamps.get(urn, (-1, "")) >= new:
            return set()
        self.asset_stamps[urn] = new
        was_deleted = urn in self.deleted_assets
        if row.get("deleted"):
            self.deleted_assets.add(urn)
        else:
            self.deleted_assets.discard(urn)
        if was_deleted == (urn in self.deleted_assets):
            return set()
        # A restored asset may be reached again through any asset that feeds it.
        return self.touching((urn, *self.graph.sources(urn)))

    def touching(self, urns: Iterable[str]) -> set[AssignmentKey]:
        """Origins that hold a tag on, or reach, any of ``urns``."""
        out: set[AssignmentKey] = set()
        for urn in urns:
            out.update((urn, tag) for tag in self.tags_on.get(urn, ()))
            out.update(self.reached_by.get(urn, ()))
        return out

    def put_propagated(self, row: Propagated) -> bool:
        """Hold ``row`` if it is newer than the held one; keep the indexes in step."""
        held = self.rows.get(row.key)
        if held is not None and held.stamp >= row.stamp:
            return False
        self.rows[row.key] = row
        origin = (row.origin, row.tag)
        live = self.by_origin.setdefault(origin, {})
        if row.deleted:
            live.pop(row.urn, None)
            if not live:
                del self.by_origin[origin]
            reached = self.reached_by.get(row.urn)
            if reached is not None:
                reached.discard(origin)
                if not reached:
                    del self.reached_by[row.urn]
        else:
            live[row.urn] = row
            self.reached_by.setdefault(row.urn, set()).add(origin)
        return True

    # --- recomputing ---------------------------------------------------------------------------------------------

    def origins(self) -> set[AssignmentKey]:
        """Every origin worth a recompute at bootstrap: live spreading assignments and origins holding rows."""
        return {k for k, a in self.assignments.items() if a.spreads} | set(self.by_origin)

    def plan(self, origin: AssignmentKey) -> Plan:
        """Recompute one origin and hold the outcome (the caller publishes it before committing)."""
        result = plan_origin(
            self.tenant,
            origin,
            self.assignments.get(origin),
            self.graph,
            self.limits,
            current=self.by_origin.get(origin, {}),
            held=self.rows,
            deleted_assets=self.deleted_assets,
        )
        for row in (*result.added, *result.removed):
            self.put_propagated(row)
        return result
