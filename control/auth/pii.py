"""Who may weaken a PII mask: the rule every path that changes tags applies (admin API, ingest API).

A column is masked for a tenant's plain Trino user while a live tag matching ``access.pii_tags`` is on it, directly
or propagated along lineage (:mod:`tenants.access`). Taking such a tag off, or changing how it spreads, unmasks
columns: the caller must be trusted with the data itself, i.e. hold ``pii:read`` or ``tenant:admin`` (which a
platform administrator's token satisfies; a tenant administrator could grant itself ``pii:read`` anyway), or be a
write key created with the PII grant. :func:`weakening` tells, from one event
alone, whether it may weaken a mask and which field makes it so. The check is stateless on purpose: a removal of a
tag the asset does not hold yet still needs the grant (with a far-future version it would cancel the tag's next
addition), and the ingest API cannot afford a catalog read per event.

Two more events weaken a mask only through the lineage the tenant holds, so :func:`withdraws` decides them from the
live propagated PII tags whose path they cut: ``lineage.edge.removed`` of an edge a propagated PII tag travelled,
and ``asset.deleted`` of an asset on such a path after its origin (propagation withdraws the tags from a deleted
asset and from everything it led to; a deleted origin's tags stay, unless its assignment asked otherwise, which needed
the grant). Deleting an asset never removes its direct tags, so a delete and re-create of a column keeps its direct
PII tag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from control.auth.principal import Principal, Scope
from tenants.access.rules import is_masked_tag

CLASSIFICATION_ADDED = "io.metalake.classification.added.v1"
CLASSIFICATION_REMOVED = "io.metalake.classification.removed.v1"
CLASSIFICATION_UNPROPAGATED = "io.metalake.classification.unpropagated.v1"
EDGE_ADDED = "io.metalake.lineage.edge.added.v1"
EDGE_REMOVED = "io.metalake.lineage.edge.removed.v1"
ASSET_DELETED = "io.metalake.asset.deleted.v1"
# The events :func:`withdraws` decides (they name the URNs whose propagated tags to look at).
LINEAGE_CUTS = frozenset({EDGE_REMOVED, ASSET_DELETED})

# The scopes that let a token weaken a mask: reading PII in clear, or administering the tenant (which may grant it).
PII_GRANTS: tuple[Scope, ...] = (Scope.PII_READ, Scope.TENANT_ADMIN)

# Options of classification.added that keep a tag from reaching (or staying on) the assets downstream, with the value
# that does so (the schema's defaults spread the tag).
_SPREAD_OPTIONS: tuple[tuple[str, bool], ...] = (
    ("propagate", False),
    ("restrict_propagation_through_lineage", True),
    ("remove_propagations_on_entity_delete", True),
)
_WILDCARDS = "*?["


@dataclass(frozen=True)
class Weakening:
    """Why an event may unmask PII: the field at fault (``data/<name>``, as the ingest API names fields) and a
    sentence for the problem detail (never a value the caller sent)."""

    field: str
    reason: str


def may_weaken(principal: Principal) -> bool:
    """Whether a token's principal may take PII tags off or stop them spreading."""
    return any(principal.has(scope) for scope in PII_GRANTS)


def blocks_masked(blocked: str, patterns: Iterable[str]) -> bool:
    """Whether an edge blocking ``blocked`` stops a masked tag: a blocked tag stops its sub-tags too
    (``catalog.propagation.graph.Edge.blocks``), so ``GDPR`` stops ``GDPR.personal``. Conservative with wildcards: a
    pattern that could match some sub-tag of ``blocked`` counts."""
    below = blocked + "."
    for pattern in patterns:
        if is_masked_tag(blocked, (pattern,)):
            return True
        cut = min((i for i, ch in enumerate(pattern) if ch in _WILDCARDS), default=len(pattern))
        literal = pattern[:cut]
        if literal.startswith(below) or (cut < len(pattern) and below.startswith(literal)):
            return True
    return False


def weakening(event_type: str, data: Mapping[str, Any], patterns: Iterable[str]) -> Weakening | None:
    """The reason ``data`` of ``event_type`` may unmask a PII-tagged column, or ``None``. Pure."""
    wanted = tuple(patterns)
    tag = data.get("tag")
    masked = isinstance(tag, str) and is_masked_tag(tag, wanted)
    if event_type == CLASSIFICATION_REMOVED and masked:
        return Weakening("data/tag", "removing a PII tag needs the PII grant (pii:read or tenant:admin)")
    if event_type == CLASSIFICATION_UNPROPAGATED and masked:
        return Weakening("data/tag", "withdrawing a propagated PII tag needs the PII grant (pii:read or tenant:admin)")
    if event_type == CLASSIFICATION_ADDED and masked:
        for name, weak in _SPREAD_OPTIONS:
            if data.get(name) is weak:
                return Weakening(
                    f"data/{name}",
                    f"a PII tag with {name}={str(weak).lower()} unmasks the assets downstream: it needs the PII grant "
                    "(pii:read or tenant:admin)",
                )
    if event_type == EDGE_ADDED:
        blocked = data.get("blocked_tags")
        if isinstance(blocked, list) and any(isinstance(b, str) and blocks_masked(b, wanted) for b in blocked):
            return Weakening(
                "data/blocked_tags", "an edge blocking a PII tag needs the PII grant (pii:read or tenant:admin)"
            )
        if data.get("propagation") in ("none", "upstream"):
            return Weakening(
                "data/propagation",
                "an edge that stops tags flowing downstream stops PII tags: it needs the PII grant "
                "(pii:read or tenant:admin)",
            )
    return None


def cut_urns(event_type: str, data: Mapping[str, Any]) -> list[str]:
    """The URNs whose propagated tags :func:`withdraws` needs for this event (none for other events)."""
    if event_type == EDGE_REMOVED:
        return [str(data["urn"]), str(data["upstream"])]
    if event_type == ASSET_DELETED:
        return [str(data["urn"])]
    return []


def _crosses(path: Sequence[str], a: str, b: str) -> bool:
    return any((path[i], path[i + 1]) in ((a, b), (b, a)) for i in range(len(path) - 1))


def withdraws(
    event_type: str, data: Mapping[str, Any], propagated: Iterable[Mapping[str, Any]], patterns: Iterable[str]
) -> Weakening | None:
    """Whether an edge removal or an asset deletion withdraws a live propagated PII tag, given the tenant's live
    ``propagated_tags`` rows (``{tag, path}``) whose path names the event's URNs. Pure."""
    wanted = tuple(patterns)
    for row in propagated:
        tag, path = row.get("tag"), row.get("path")
        if not isinstance(tag, str) or not is_masked_tag(tag, wanted) or not isinstance(path, list):
            continue
        if event_type == EDGE_REMOVED and _crosses(path, str(data.get("upstream")), str(data.get("urn"))):
            return Weakening(
                "data/upstream",
                "removing an edge a PII tag propagated along needs the PII grant (pii:read or tenant:admin)",
            )
        if event_type == ASSET_DELETED and data.get("urn") in path[1:]:
            return Weakening(
                "data/urn",
                "deleting an asset a PII tag propagated to or through needs the PII grant (pii:read or tenant:admin)",
            )
    return None
