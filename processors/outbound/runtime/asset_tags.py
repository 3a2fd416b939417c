"""The tags an asset carries now (direct classifications and tags propagated along lineage), read from the tenant's
MongoDB projection for the ``asset_tags`` filter of subscriptions (:class:`control.subscriptions.filters.Filters`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pymongo import MongoClient

from metalake.lake_uri import LakeRoot
from metalake.projection import classifications, propagated_tags
from tenants.naming import names_for


class AssetTags:
    """``(tenant, urn) -> tags`` for any tenant of one MongoDB deployment; a PyMongoError propagates (the batch is
    then redelivered, as when the ledger is unreachable)."""

    def __init__(self, client: MongoClient[dict[str, Any]], lake_root: Callable[[], LakeRoot]) -> None:
        self._client = client
        # Only for the tenant's database name; read when a subscription first asks, not at start.
        self._lake_root = lake_root

    def __call__(self, tenant: str, urn: str) -> frozenset[str]:
        db = self._client[names_for(tenant, self._lake_root()).mongo_database]
        live = {"urn": urn, "deleted": {"$ne": True}}
        tags = {d["tag"] for d in classifications(db).find(live, {"_id": 0, "tag": 1}) if isinstance(d.get("tag"), str)}
        tags |= {
            d["tag"] for d in propagated_tags(db).find(live, {"_id": 0, "tag": 1}) if isinstance(d.get("tag"), str)
        }
        return frozenset(tags)
