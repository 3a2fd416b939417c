"""The dry-run: what a tag put on an asset would reach, without changing anything.

:func:`dry_run` is pure (a loaded state in, an answer out); :func:`dry_run_tenant` loads from MongoDB first what
the walk can reach (``store.load_reachable``, within an edge budget), not the whole tenant. The walk is the
processor's own (same graph, guardrails and deleted assets), as if the tag were put on the asset with ``propagate``
on and lineage not restricted.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pymongo.database import Database

from catalog.propagation.graph import Limits, TruncationReason, closure
from catalog.propagation.store import load_reachable
from catalog.propagation.tenant import TenantPropagation
from metalake.urn import InvalidUrn, canonical_urn

# The event schemas' patterns: a dry-run asks about assets and tags that events could carry.
URN_PATTERN = r"^urn:metalake:[a-z][a-z0-9_-]{0,63}:[^/]+(/[^/]+){1,4}$"
TAG_PATTERN = r"^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$"


class InvalidDryRun(ValueError):
    """A dry-run request naming an impossible asset or tag; ``field`` says which."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(message)
        self.field = field


def check_request(urn: str, tag: str) -> str:
    """The URN in canonical form (the graph holds canonical URNs); raises :class:`InvalidDryRun`."""
    not_urn = InvalidDryRun("urn", "urn is not an asset URN (urn:metalake:<platform>:<instance>/<database>[/...])")
    if len(urn) > 2048 or not re.fullmatch(URN_PATTERN, urn):
        raise not_urn
    try:
        canonical = canonical_urn(urn)
    except InvalidUrn:
        raise not_urn from None
    if not re.fullmatch(TAG_PATTERN, tag):
        raise InvalidDryRun("tag", "tag must be a letter then up to 127 of letters, digits and _ . : / -")
    return canonical


@dataclass(frozen=True)
class Reached:
    urn: str
    path: tuple[str, ...]
    depth: int
    already_tagged: bool  # the asset holds the tag already (directly, or propagated from any origin)


@dataclass(frozen=True)
class DryRun:
    urn: str
    tag: str
    reached: tuple[Reached, ...]
    max_depth: int
    truncated: bool
    reason: TruncationReason | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "urn": self.urn,
            "tag": self.tag,
            "count": len(self.reached),
            "max_depth": self.max_depth,
            "truncated": self.truncated,
            "reason": self.reason,
            "reached": [
                {"urn": r.urn, "path": list(r.path), "depth": r.depth, "already_tagged": r.already_tagged}
                for r in self.reached
            ],
        }


def _holds(state: TenantPropagation, urn: str, tag: str) -> bool:
    if tag in state.tags_on.get(urn, ()):
        return True
    return any(t == tag for _, t in state.reached_by.get(urn, ()))


def dry_run(state: TenantPropagation, urn: str, tag: str, limits: Limits | None = None) -> DryRun:
    """The assets ``tag`` would reach from ``urn``, nearest first (then by URN)."""
    found = closure(state.graph, urn, tag, limits or state.limits, excluded=frozenset(state.deleted_assets))
    reached = sorted(found.reached.items(), key=lambda item: (item[1].depth, item[0]))
    return DryRun(
        urn=urn,
        tag=tag,
        reached=tuple(Reached(u, r.path, r.depth, _holds(state, u, tag)) for u, r in reached),
        max_depth=found.max_depth,
        truncated=found.truncated,
        reason=found.reason,
    )


def dry_run_tenant(
    database: Database[dict[str, Any]], tenant: str, urn: str, tag: str, limits: Limits, *, max_edges: int
) -> DryRun:
    """Load what the walk can reach, then :func:`dry_run`; raises :class:`InvalidDryRun` first for an impossible
    URN or tag, :class:`catalog.propagation.store.TooLarge` past ``max_edges`` lineage edges."""
    canonical = check_request(urn, tag)
    state = load_reachable(database, tenant, canonical, tag, limits, max_edges=max_edges)
    return dry_run(state, canonical, tag, limits)
