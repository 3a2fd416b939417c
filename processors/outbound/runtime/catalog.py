"""What destinations and filters read about an asset from the tenant's MongoDB projection (``metalake_<tenant>``):
the tags it carries now (direct classifications and tags propagated along lineage), for the ``asset_tags`` filter of
subscriptions (:class:`control.subscriptions.filters.Filters`); and an incident's reach (the asset's owners, an owners
edit made in the catalog winning over the source's, and the assets downstream of it by lineage), which the
notifications show."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pymongo import MongoClient
from pymongo.database import Database

from catalog.projection import (
    EDITED_OWNERS,
    apply_edits,
    asset_edits,
    assets,
    classifications,
    lineage,
    propagated_tags,
)
from metalake.lake_uri import LakeRoot
from tenants.naming import names_for


@dataclass(frozen=True)
class Impact:
    """An asset's owners and what lies downstream of it: ``downstream`` in breadth-first order, at most the
    reader's ``max_assets``; ``truncated`` when the walk stopped at that bound or at ``max_depth``."""

    owners: tuple[str, ...]
    downstream: tuple[str, ...]
    truncated: bool


class Catalog:
    """Reads for any tenant of one MongoDB deployment. A PyMongoError propagates: the batch is then redelivered, as
    when the ledger is unreachable."""

    def __init__(
        self,
        client: MongoClient[dict[str, Any]],
        lake_root: Callable[[], LakeRoot],
        *,
        max_depth: int = 5,
        max_assets: int = 100,
    ) -> None:
        self._client = client
        # Only for the tenant's database name; read when first needed, not at start.
        self._lake_root = lake_root
        self.max_depth, self.max_assets = max_depth, max_assets

    def _db(self, tenant: str) -> Database[dict[str, Any]]:
        return self._client[names_for(tenant, self._lake_root()).mongo_database]

    def tags(self, tenant: str, urn: str) -> frozenset[str]:
        """The tags ``urn`` carries now, as written (live rows only)."""
        db = self._db(tenant)
        live = {"urn": urn, "deleted": {"$ne": True}}
        found = {d.get("tag") for d in classifications(db).find(live, {"_id": 0, "tag": 1})}
        found |= {d.get("tag") for d in propagated_tags(db).find(live, {"_id": 0, "tag": 1})}
        return frozenset(t for t in found if isinstance(t, str))

    def impact(self, tenant: str, urn: str) -> Impact:
        """``urn``'s owners and the assets its live lineage edges lead to, one query per level of the walk."""
        db = self._db(tenant)
        doc = assets(db).find_one({"_id": urn}, {"owners": 1})
        # The owners people set in the catalog win over the source's, as the API shows them (one merge rule).
        edit = asset_edits(db).find_one({"_id": f"{urn}|{EDITED_OWNERS}", "deleted": {"$ne": True}})
        shown = apply_edits(doc or {}, [edit] if edit is not None else [])["owners"]
        owners = tuple(str(o) for o in shown or [])
        seen, frontier, depth = {urn}, [urn], 0
        order: list[str] = []
        truncated = False
        while frontier and not truncated:
            if depth == self.max_depth:
                # Stopped by depth: more lies beyond only if some edge leaves this level.
                truncated = lineage(db).find_one({"upstream": {"$in": frontier}, "deleted": {"$ne": True}}) is not None
                break
            edges = lineage(db).find({"upstream": {"$in": frontier}, "deleted": {"$ne": True}}, {"_id": 0, "urn": 1})
            following = []
            for target in sorted({str(e["urn"]) for e in edges if isinstance(e.get("urn"), str)}):
                if target in seen:
                    continue
                if len(order) == self.max_assets:
                    truncated = True
                    break
                seen.add(target)
                order.append(target)
                following.append(target)
            frontier, depth = following, depth + 1
        return Impact(owners, tuple(order), truncated)
