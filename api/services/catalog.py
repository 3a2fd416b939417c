"""Reads of one tenant's MongoDB projection (``metalake_<tenant>``): assets, tags, lineage edges, incidents.

The documents are written by the streaming job (``processors.enrichment.projection``): ``_id`` is the state key
(``urn``; ``urn|tag``; ``upstream|urn``; ``incident_id|urn``; ``urn|tag|origin`` for propagated tags), the key
fields are also stored as fields, and a removal leaves a versioned tombstone (``deleted: true``) that every read here
skips. Listings use keyset paging on a unique sort key, so a page never repeats or skips a document.

Name-prefix search is an anchored, case-sensitive regular expression on ``name``: with the ``(name, _id)`` index in
:data:`INDEXES` MongoDB turns it into an index range scan. FerretDB 1.24 (PostgreSQL backend, the local stack) pushes
down only top-level scalar equality (served by an index for ``_id`` and ``urn``, see docs/local-stack.md) and filters
regular expressions, ranges and ``$in`` after reading the collection (see docs/api-resources.md).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pymongo import ASCENDING
from pymongo.database import Database

from catalog import projection
from catalog.indexes import INDEXES
from catalog.projection import (
    AssetDoc,
    AssetEditDoc,
    ClassificationDoc,
    IncidentDoc,
    LineageDoc,
    PropagatedTagDoc,
    unescape_keys,
)
from metalake.mongo import Doc

ASSETS = projection.ASSETS_COLLECTION
CLASSIFICATIONS = projection.CLASSIFICATIONS_COLLECTION
PROPAGATED = projection.PROPAGATED_COLLECTION
LINEAGE = projection.LINEAGE_COLLECTION
INCIDENTS = projection.INCIDENTS_COLLECTION
ASSET_EDITS = projection.ASSET_EDITS_COLLECTION

# Indexes the reads below are shaped for: catalog.indexes (provisioning creates them).
LIVE: Doc = {"deleted": {"$ne": True}}
# More URNs than this behind a tag filter: the caller must narrow the search (a name prefix) instead.
MAX_TAG_CANDIDATES = 50_000


def ensure_indexes(database: Database[Doc]) -> None:
    for collection, indexes in INDEXES.items():
        database[collection].create_indexes(list(indexes))


class TooBroad(ValueError):
    """A filter matches more candidates than a search may hold in one query."""


@dataclass(frozen=True)
class SearchPage:
    docs: list[AssetDoc]
    has_more: bool


def after(fields: Sequence[str], key: Sequence[str]) -> dict[str, Any]:
    """A MongoDB filter for documents strictly after ``key`` in ascending order of ``fields`` (keyset paging)."""
    clauses: list[dict[str, Any]] = []
    for i, name in enumerate(fields):
        clause: dict[str, Any] = {fields[j]: key[j] for j in range(i)}
        clause[name] = {"$gt": key[i]}
        clauses.append(clause)
    return clauses[0] if len(clauses) == 1 else {"$or": clauses}


def prefix_filter(prefix: str) -> Doc:
    """Anchored and escaped: MongoDB can bound an index scan with it (no options, no leading wildcard)."""
    return {"$regex": "^" + re.escape(prefix)}


def tag_clause(tags: Sequence[str], classification: str | None) -> list[Doc]:
    """One ``tag`` condition per requested tag, plus the family condition (``GDPR`` matches ``GDPR`` and ``GDPR.*``)."""
    clauses: list[Doc] = [{"tag": tag} for tag in tags]
    if classification is not None:
        clauses.append({"$or": [{"tag": classification}, {"tag": prefix_filter(classification + ".")}]})
    return clauses


class Catalog:
    """One tenant's projection. Every method is a bounded number of queries (no per-document round trips)."""

    def __init__(self, database: Database[Doc]) -> None:
        self._assets = projection.assets(database)
        self._classifications = projection.classifications(database)
        self._propagated = projection.propagated_tags(database)
        self._lineage = projection.lineage(database)
        self._incidents = projection.incidents(database)
        self._edits = projection.asset_edits(database)

    # -- assets and their tags -----------------------------------------------------------------------------------

    def asset(self, urn: str) -> AssetDoc | None:
        """The asset document, tombstone included (the caller tells "deleted" from "never seen"), its property names
        as the source sent them (the projection stores them escaped: :func:`catalog.projection.escape_keys`)."""
        doc = self._assets.find_one({"_id": urn})
        if doc is not None and doc.get("properties"):
            doc["properties"] = unescape_keys(doc["properties"])
        return doc

    def tags_of(self, urns: Sequence[str]) -> dict[str, list[ClassificationDoc]]:
        """Live direct classifications per URN, by tag."""
        out: dict[str, list[ClassificationDoc]] = {}
        if not urns:
            return out
        for doc in self._classifications.find({"urn": {"$in": list(urns)}, **LIVE}).sort("_id", ASCENDING):
            out.setdefault(doc["urn"], []).append(doc)
        return out

    def propagated_of(self, urns: Sequence[str]) -> dict[str, list[PropagatedTagDoc]]:
        """Live propagated tags per URN (empty until propagation writes ``propagated_tags``)."""
        out: dict[str, list[PropagatedTagDoc]] = {}
        if not urns:
            return out
        for doc in self._propagated.find({"urn": {"$in": list(urns)}, **LIVE}).sort("_id", ASCENDING):
            out.setdefault(doc["urn"], []).append(doc)
        return out

    def edits_of(self, urn: str, limit: int) -> list[AssetEditDoc]:
        """The asset's live edits by aspect; at most ``limit`` (the API bounds how many live ones an asset holds;
        cleared ones, tombstones, are not read: they pile up with every property name ever edited)."""
        return projection.live_edits(self._edits.database, urn, limit)

    def edit(self, urn: str, aspect: str) -> AssetEditDoc | None:
        """The edit document (``urn|aspect``), tombstone included (it holds the version a new edit must pass)."""
        return self._edits.find_one({"_id": f"{urn}|{aspect}"})

    def classification(self, urn: str, tag: str) -> ClassificationDoc | None:
        """The classification document (``urn|tag``), tombstone included."""
        return self._classifications.find_one({"_id": f"{urn}|{tag}"})

    def _tagged_urns(self, tags: Sequence[str], classification: str | None) -> set[str]:
        """URNs holding every requested tag (direct or propagated) and, if given, a tag of the family."""
        found: set[str] | None = None
        for clause in tag_clause(tags, classification):
            urns: set[str] = set()
            for tags_collection in (self._classifications, self._propagated):
                for doc in tags_collection.find({**clause, **LIVE}, {"urn": 1, "_id": 0}):
                    urns.add(doc["urn"])
                    if len(urns) > MAX_TAG_CANDIDATES:
                        raise TooBroad("tag")
            found = urns if found is None else found & urns
        return found or set()

    def search(
        self,
        *,
        prefix: str | None,
        tags: Sequence[str],
        classification: str | None,
        resume_after: Sequence[str] | None,
        limit: int,
    ) -> SearchPage:
        """Live assets by name prefix (sorted by name, URN) or, without a prefix, by URN; filtered by tags."""
        query: Doc = dict(LIVE)
        sort_fields: tuple[str, ...] = ("name", "_id") if prefix is not None else ("_id",)
        if prefix is not None:
            query["name"] = prefix_filter(prefix)
        if tags or classification is not None:
            query["_id"] = {"$in": sorted(self._tagged_urns(tags, classification))}
        if resume_after is not None:
            query = {"$and": [query, after(sort_fields, resume_after)]}
        cursor = self._assets.find(query).sort([(f, ASCENDING) for f in sort_fields]).limit(limit + 1)
        docs = list(cursor)
        return SearchPage(docs[:limit], len(docs) > limit)

    # -- lineage -------------------------------------------------------------------------------------------------

    def edges_from(self, urns: Iterable[str], direction: str) -> list[LineageDoc]:
        """Live edges leaving ``urns`` downstream (they are the upstream) or upstream (they are the downstream)."""
        field = "upstream" if direction == "downstream" else "urn"
        return list(self._lineage.find({field: {"$in": sorted(urns)}, **LIVE}).sort("_id", ASCENDING))

    def summaries(self, urns: Sequence[str]) -> dict[str, AssetDoc]:
        """Name and kind of the live assets among ``urns``, one query (only those fields and ``_id`` are read)."""
        if not urns:
            return {}
        docs = self._assets.find({"_id": {"$in": list(urns)}, **LIVE}, {"name": 1, "kind": 1})
        return {d["_id"]: d for d in docs}

    # -- incidents -----------------------------------------------------------------------------------------------

    def incidents(
        self, *, urn: str | None, state: str, resume_after: Sequence[str] | None, limit: int
    ) -> tuple[list[IncidentDoc], bool]:
        query: Doc = dict(LIVE)
        if urn is not None:
            query["urn"] = urn
        if state == "open":
            query["status"] = {"$ne": "resolved"}
        elif state == "resolved":
            query["status"] = "resolved"
        if resume_after is not None:
            query["_id"] = {"$gt": resume_after[0]}
        docs = list(self._incidents.find(query).sort("_id", ASCENDING).limit(limit + 1))
        return docs[:limit], len(docs) > limit
