"""One origin's recompute: its closure now versus the propagated tags held, as rows to add and rows to remove.

Versions are a function of what is held, so a recompute after a crash publishes the very same rows (same versions,
same event ids): the version of a row is the assignment's version, or one past the held row's, whichever is larger.
That also orders a removal after the add it undoes, and a re-add after the removal.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass

from catalog.propagation.graph import Closure, Limits, LineageGraph, TruncationReason, closure
from catalog.propagation.model import Assignment, AssignmentKey, Propagated, PropagatedKey

PROPAGATED_TYPE = "io.metalake.classification.propagated.v1"
UNPROPAGATED_TYPE = "io.metalake.classification.unpropagated.v1"
_NAMESPACE = uuid.UUID("0b7f6d0e-8c55-4e8e-9a43-5a6f3f4e2c19")


def event_id(tenant: str, event_type: str, key: PropagatedKey, version: int) -> str:
    urn, tag, origin = key
    return str(uuid.uuid5(_NAMESPACE, f"{tenant}|{event_type}|{urn}|{tag}|{origin}|{version}"))


@dataclass(frozen=True)
class Plan:
    """The outcome of one recompute. ``frozen`` means the origin was left as it is (a deleted source whose
    assignment keeps its propagations); ``removals_held`` means a time budget cut the walk short, so nothing was
    removed (a partial walk must not undo what a complete one found)."""

    tenant: str
    origin: str
    tag: str
    added: tuple[Propagated, ...] = ()
    removed: tuple[Propagated, ...] = ()
    reached: int = 0
    max_depth: int = 0
    truncated: bool = False
    reason: TruncationReason | None = None
    frozen: bool = False
    removals_held: bool = False

    @property
    def changed(self) -> bool:
        return bool(self.added or self.removed)


def _next_version(assignment: Assignment | None, held: Propagated | None) -> int:
    floor = assignment.stamp[0] if assignment is not None else 0
    return max(floor, held.stamp[0] + 1 if held is not None else 0)


def _row(
    tenant: str, event_type: str, template: Propagated, assignment: Assignment | None, held: Propagated | None
) -> Propagated:
    version = _next_version(assignment, held)
    return Propagated(
        urn=template.urn,
        tag=template.tag,
        origin=template.origin,
        path=template.path,
        stamp=(version, event_id(tenant, event_type, template.key, version)),
        deleted=event_type == UNPROPAGATED_TYPE,
    )


def plan_origin(  # noqa: PLR0913
    tenant: str,
    origin: AssignmentKey,
    assignment: Assignment | None,
    graph: LineageGraph,
    limits: Limits,
    *,
    current: Mapping[str, Propagated],
    held: Mapping[PropagatedKey, Propagated],
    deleted_assets: set[str],
) -> Plan:
    """Diff the origin's closure with ``current`` (its live propagated rows, by urn)."""
    urn, tag = origin
    if assignment is not None and assignment.spreads and urn in deleted_assets:
        if not assignment.remove_propagations_on_entity_delete:
            return Plan(tenant, urn, tag, reached=len(current), frozen=True)
        assignment_spreads = False
    else:
        assignment_spreads = assignment is not None and assignment.spreads
    found = closure(graph, urn, tag, limits, excluded=deleted_assets) if assignment_spreads else Closure(urn, tag, {})
    added = []
    for target, reach in sorted(found.reached.items()):
        row = current.get(target)
        if row is not None and row.path == reach.path:
            continue
        template = Propagated(target, tag, urn, reach.path, (0, ""))
        added.append(_row(tenant, PROPAGATED_TYPE, template, assignment, held.get(template.key)))
    hold_removals = found.reason == "time_budget"
    removed = []
    if not hold_removals:
        for target, row in sorted(current.items()):
            if target not in found.reached:
                removed.append(_row(tenant, UNPROPAGATED_TYPE, row, assignment, held.get(row.key)))
    reached = len(found.reached) + (sum(1 for t in current if t not in found.reached) if hold_removals else 0)
    return Plan(
        tenant,
        urn,
        tag,
        added=tuple(added),
        removed=tuple(removed),
        reached=reached,
        max_depth=found.max_depth,
        truncated=found.truncated,
        reason=found.reason,
        removals_held=hold_removals,
    )
