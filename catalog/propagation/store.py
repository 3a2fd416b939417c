"""Loading a tenant's propagation state from its MongoDB projection (``metalake_<tenant>``).

:func:`load_tenant` reads everything, at a tenant's first change (the processor then keeps it up to date).
:func:`load_reachable` reads only what one dry-run can reach: the lineage around the origin level by level, never
deeper than the walk may go, and the tag's rows on those assets; its edge budget bounds what one request can make the
API hold. MongoDB holds every committed row (the changes topic is published after the upserts), so what is loaded is
at least as new as any change that made us look.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from pymongo.database import Database

from catalog import projection
from catalog.propagation.graph import Limits
from catalog.propagation.tenant import (
    ASSETS,
    CLASSIFICATIONS,
    LINEAGE,
    PROPAGATED,
    TenantPropagation,
    edge_from_row,
)
from metalake.mongo import Doc

# URNs per ``$in`` of one query: a level of thousands of assets is read in a few queries, none of them huge.
IN_CHUNK = 1000
LIVE: Doc = {"deleted": {"$ne": True}}

# Propagation's table names -> the projection's collections. Read as open documents (without ``_id``, projected
# away): TenantPropagation.apply reads the fields of a table's key and state by name.
_COLLECTIONS = (
    (LINEAGE, projection.LINEAGE_COLLECTION),
    (CLASSIFICATIONS, projection.CLASSIFICATIONS_COLLECTION),
    (PROPAGATED, projection.PROPAGATED_COLLECTION),
)


def load_tenant(database: Database[Doc], tenant: str, limits: Limits) -> TenantPropagation:
    """The tenant's state: live and deleted lineage edges, classifications and propagated tags (tombstones keep
    versions ordered), and the deleted assets (only those: a live asset needs no row here)."""
    state = TenantPropagation(tenant, limits)
    for table, collection in _COLLECTIONS:
        for doc in database[collection].find({}, {"_id": 0}):
            state.apply(table, doc)
    deleted = database[projection.ASSETS_COLLECTION].find(
        {"deleted": True}, {"_id": 0, "urn": 1, "version": 1, "event_id": 1}
    )
    for doc in deleted:
        state.apply(ASSETS, {**doc, "deleted": True})
    return state


class TooLarge(ValueError):
    """The lineage around the origin holds more edges than the dry-run's budget (``max_edges``)."""

    def __init__(self, max_edges: int) -> None:
        super().__init__(
            f"the lineage within reach of this asset has more than {max_edges} edges: ask with a smaller max_depth"
        )
        self.max_edges = max_edges


def _chunks(urns: Sequence[str]) -> Iterator[list[str]]:
    for start in range(0, len(urns), IN_CHUNK):
        yield list(urns[start : start + IN_CHUNK])


def load_reachable(
    database: Database[Doc], tenant: str, origin: str, tag: str, limits: Limits, *, max_edges: int
) -> TenantPropagation:
    """The part of the tenant's state a dry-run of ``tag`` from ``origin`` can see: the live lineage edges within
    ``limits.max_depth + 1`` hops of the origin whichever way tags may cross them (the walk looks one hop past its
    depth to know whether it was cut short), the deleted assets among their ends, and the rows of ``tag`` on them.
    The walk over it is the one over the whole tenant. Raises :class:`TooLarge` past ``max_edges`` edges."""
    state = TenantPropagation(tenant, limits)
    lineage = database[projection.LINEAGE_COLLECTION]
    seen: set[str] = {origin}
    level = [origin]
    edges = 0
    for _ in range(limits.max_depth + 1):
        following: set[str] = set()
        for chunk in _chunks(level):
            # The edges tags may leave these assets by: downstream from an upstream end (the default, also for an
            # absent or unknown direction), upstream from a downstream end. Blocked tags are left to the walk.
            query: Doc = {
                "$or": [
                    {"upstream": {"$in": chunk}, "propagation": {"$nin": ["upstream", "none"]}},
                    {"urn": {"$in": chunk}, "propagation": {"$in": ["upstream", "both"]}},
                ],
                **LIVE,
            }
            for doc in lineage.find(query, {"_id": 0}):
                edge = edge_from_row(doc)
                if edge.key in state.graph:
                    continue  # a "both" edge between two assets of the level
                edges += 1
                if edges > max_edges:
                    raise TooLarge(max_edges)
                state.apply(LINEAGE, doc)
                following.update(dst for _, dst in edge.flows() if dst not in seen)
        seen |= following
        level = sorted(following)
        if not level:
            break
    _load_tag_rows(database, state, sorted(seen), tag)
    return state


def _load_tag_rows(database: Database[Doc], state: TenantPropagation, urns: Sequence[str], tag: str) -> None:
    """The deleted assets among ``urns`` (the walk neither reaches nor crosses them) and the rows that say whether
    each holds ``tag`` already (assigned, or propagated from any origin)."""
    for chunk in _chunks(urns):
        deleted = database[projection.ASSETS_COLLECTION].find(
            {"_id": {"$in": chunk}, "deleted": True}, {"_id": 0, "urn": 1, "version": 1, "event_id": 1}
        )
        for doc in deleted:
            state.apply(ASSETS, {**doc, "deleted": True})
        assigned = database[projection.CLASSIFICATIONS_COLLECTION].find(
            {"_id": {"$in": [f"{u}|{tag}" for u in chunk]}, **LIVE}, {"_id": 0}
        )
        for doc in assigned:
            state.apply(CLASSIFICATIONS, doc)
        propagated = database[projection.PROPAGATED_COLLECTION].find(
            {"tag": tag, "urn": {"$in": chunk}, **LIVE}, {"_id": 0}
        )
        for doc in propagated:
            state.apply(PROPAGATED, doc)
