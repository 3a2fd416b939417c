"""What propagation keeps per tenant: tag assignments (direct classifications) and propagated tags.

Both mirror rows of the tenant's state tables (``classifications``, ``propagated_tags``) with their (version, event
id), so a change seen twice, or out of order, is applied once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

Stamp = tuple[int, str]  # (version, event id): newest wins, like every state table
AssignmentKey = tuple[str, str]  # (urn, tag)
PropagatedKey = tuple[str, str, str]  # (urn, tag, origin)


def stamp(row: dict[str, Any]) -> Stamp:
    return (int(row.get("version") or 0), str(row.get("event_id") or ""))


@dataclass(frozen=True)
class Assignment:
    """A tag put on an asset directly (never a propagated one: propagated tags do not propagate again).

    Defaults follow the event schema: ``propagate`` true; propagations are kept when the asset is deleted (the data
    downstream still holds what the tag is about); lineage is not restricted.
    """

    urn: str
    tag: str
    stamp: Stamp
    deleted: bool = False
    propagate: bool = True
    remove_propagations_on_entity_delete: bool = False
    restrict_propagation_through_lineage: bool = False

    @property
    def key(self) -> AssignmentKey:
        return (self.urn, self.tag)

    @property
    def spreads(self) -> bool:
        """Whether this assignment sends its tag along lineage at all."""
        return not self.deleted and self.propagate and not self.restrict_propagation_through_lineage

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Assignment:
        def flag(name: str, default: bool) -> bool:
            value = row.get(name)
            return default if value is None else bool(value)

        return cls(
            urn=str(row["urn"]),
            tag=str(row["tag"]),
            stamp=stamp(row),
            deleted=bool(row.get("deleted")),
            propagate=flag("propagate", True),
            remove_propagations_on_entity_delete=flag("remove_propagations_on_entity_delete", False),
            restrict_propagation_through_lineage=flag("restrict_propagation_through_lineage", False),
        )


@dataclass(frozen=True)
class Propagated:
    """A tag that reached ``urn`` from ``origin`` along ``path`` (origin first, urn last)."""

    urn: str
    tag: str
    origin: str
    path: tuple[str, ...]
    stamp: Stamp
    deleted: bool = False

    @property
    def key(self) -> PropagatedKey:
        return (self.urn, self.tag, self.origin)

    @property
    def depth(self) -> int:
        return len(self.path) - 1

    @classmethod
    def from_row(cls, row: dict[str, Any]) -> Propagated:
        return cls(
            urn=str(row["urn"]),
            tag=str(row["tag"]),
            origin=str(row["origin"]),
            path=tuple(str(p) for p in row.get("path") or ()),
            stamp=stamp(row),
            deleted=bool(row.get("deleted")),
        )
