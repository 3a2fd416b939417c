"""A tenant's PII-tagged Trino columns, from its MongoDB projection: direct classifications and propagated tags."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from pymongo import MongoClient
from pymongo.database import Database

from catalog.projection import CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION
from metalake.lake_uri import LakeRoot
from tenants.access.rules import MirroredSchema, TrinoColumn, column_for_urn, is_masked_tag
from tenants.naming import names_for

# Collections of a tenant's MongoDB database holding tag assignments (propagated_tags: written by propagation).
TAG_COLLECTIONS = (CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION)


def masked_columns(  # noqa: PLR0913
    docs: Iterable[Mapping[str, Any]],
    *,
    schema: str,
    patterns: Iterable[str],
    catalog: str,
    instance: str,
    mirrored: Iterable[MirroredSchema] = (),
    former: Iterable[str] = (),
) -> set[TrinoColumn]:
    """The Trino columns (or whole tables) that live tag documents put under a mask, ``schema`` the tenant's
    (``former``: its earlier names, see :func:`column_for_urn`). Pure."""
    wanted, sources, earlier = tuple(patterns), tuple(mirrored), tuple(former)
    out: set[TrinoColumn] = set()
    for doc in docs:
        if doc.get("deleted") or not isinstance(doc.get("urn"), str) or not isinstance(doc.get("tag"), str):
            continue
        if not is_masked_tag(doc["tag"], wanted):
            continue
        column = column_for_urn(
            doc["urn"], schema=schema, catalog=catalog, instance=instance, mirrored=sources, former=earlier
        )
        if column is not None:
            out.add(column)
    return out


def load_masked_columns(  # noqa: PLR0913
    db: Database[dict[str, Any]],
    *,
    schema: str,
    patterns: Iterable[str],
    catalog: str,
    instance: str,
    mirrored: Iterable[MirroredSchema] = (),
    former: Iterable[str] = (),
) -> set[TrinoColumn]:
    """Read the tenant's live tag assignments on ``trino`` URNs (and mirrored schemas') and map them to columns."""
    sources, earlier = tuple(mirrored), tuple(former)
    prefixes = ["urn:metalake:trino:", *(m.urn_prefix for m in sources)]
    query = {"deleted": {"$ne": True}, "$or": [{"urn": {"$regex": "^" + re.escape(p)}} for p in prefixes]}
    projection = {"urn": 1, "tag": 1, "deleted": 1}
    out: set[TrinoColumn] = set()
    for name in TAG_COLLECTIONS:
        docs = db[name].find(query, projection)
        out |= masked_columns(
            docs, schema=schema, patterns=patterns, catalog=catalog, instance=instance, mirrored=sources, former=earlier
        )
    return out


def propagated_through(
    db: Database[dict[str, Any]], urns: Iterable[str], *, patterns: Iterable[str]
) -> list[dict[str, Any]]:
    """The tenant's live propagated tags matching ``patterns`` whose lineage path names one of ``urns``: what deleting
    those assets or edges between them would withdraw (``control.auth.pii.withdraws``). Only ``tag`` and ``path``;
    rows of other tags are dropped while reading, so the answer is bounded by the PII tags on those paths."""
    wanted = tuple(patterns)
    query = {"deleted": {"$ne": True}, "path": {"$in": sorted(set(urns))}}
    cursor = db[PROPAGATED_COLLECTION].find(query, {"_id": 0, "tag": 1, "path": 1})
    return [doc for doc in cursor if isinstance(doc.get("tag"), str) and is_masked_tag(doc["tag"], wanted)]


class PropagatedPaths:
    """:func:`propagated_through` for any tenant of one MongoDB deployment (the ingest API's lineage check)."""

    def __init__(self, client: MongoClient[dict[str, Any]], lake_root: Callable[[], LakeRoot]) -> None:
        self._client = client
        self._lake_root = lake_root

    def __call__(self, tenant: str, urns: Iterable[str], patterns: Iterable[str]) -> list[dict[str, Any]]:
        db = self._client[names_for(tenant, self._lake_root()).mongo_database]
        return propagated_through(db, urns, patterns=patterns)
