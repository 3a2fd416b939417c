"""Exact, indexed lookups of an asset's tags by a URN whose case may differ (docs/enforcement.md).

Trino lower-cases every name it reports, while a source may not (``.../public/People/Email``). The tag documents
(``classifications``, ``propagated_tags``) therefore carry ``urn_keys``: the *normalised* URN of their asset and of
its parent (every segment and the instance lower-cased, then spelled canonically), written by the streaming job's
projection and indexed (``catalog.indexes.INDEXES``; on FerretDB a GIN index, deploy/local/ferretdb/indexes.sql).
A table's tags, its own and its columns', are then the documents whose ``urn_keys`` hold the table's normalised URN:
an equality (or, on a server whose index serves it, ``$in`` for several tables: :func:`in_served_by_index`), where
the tags were found before by a case-insensitive regex that no index serves.

Documents written before the field existed are backfilled by :func:`backfill` (idempotent, in batches, one statement
per command as the projection writes), which then records a marker in the tenant's database; a reader trusts the
field only once the marker is there (:func:`ready`), and reads the old way before.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pymongo.database import Database

from catalog.projection import CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION
from metalake.urn import AssetUrn, InvalidUrn

log = logging.getLogger(__name__)

FIELD = "urn_keys"
COLLECTIONS = (CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION)
# One small document per backfill done, in the tenant's own database (dropped with it).
MIGRATIONS_COLLECTION = "migrations"
MARKER_ID = "urn_keys.v1"
BATCH = 500


def normalised(urn: str) -> str:
    """The URN with its instance and path segments lower-cased, spelled canonically; a string that is not an asset
    URN is lower-cased as it is."""
    try:
        parsed = AssetUrn.parse(urn)
    except InvalidUrn:
        return urn.lower()
    return str(AssetUrn(parsed.platform, parsed.instance.lower(), tuple(p.lower() for p in parsed.path)))


def urn_keys(urn: str) -> list[str]:
    """What ``urn_keys`` holds for a document about ``urn``: its normalised URN, then its parent's (a database, the
    top of the path, has none)."""
    keys = [normalised(urn)]
    try:
        parent = AssetUrn.parse(urn).parent()
    except InvalidUrn:
        parent = None
    if parent is not None:
        keys.append(normalised(str(parent)))
    return keys


def in_served_by_index(database: Database[Any]) -> bool:
    """Whether the server answers ``$in`` on an indexed field from the index: MongoDB does; FerretDB 1.x (its
    ``buildInfo`` names a ``ferretdbVersion``) filters ``$in`` after reading the whole collection and pushes down only
    a scalar equality (docs/local-stack.md), so there each table is a query of its own."""
    return "ferretdbVersion" not in database.client.admin.command("buildInfo")


def ready(database: Database[Any]) -> bool:
    """Whether every tag document of this tenant's projection carries ``urn_keys`` (the backfill has run)."""
    return database[MIGRATIONS_COLLECTION].find_one({"_id": MARKER_ID}) is not None


def _backfill_collection(database: Database[Any], name: str, batch: int) -> int:
    """Set ``urn_keys`` where it is missing or stale; one read of the collection (FerretDB filters ``$exists`` after
    reading every document anyway), updates sent per ``batch`` read, each alone in its command."""
    collection = database[name]
    updated = 0
    pending: list[tuple[Any, str, list[str]]] = []
    cursor = collection.find({}, {"_id": 1, "urn": 1, FIELD: 1}, batch_size=batch)
    for doc in cursor:
        urn = doc.get("urn")
        if isinstance(urn, str) and doc.get(FIELD) != (keys := urn_keys(urn)):
            pending.append((doc["_id"], urn, keys))
        if len(pending) >= batch:
            updated += _apply(database, name, pending)
            pending = []
    return updated + _apply(database, name, pending)


def _apply(database: Database[Any], name: str, pending: list[tuple[Any, str, list[str]]]) -> int:
    updated = 0
    for doc_id, urn, keys in pending:
        # The URN in the filter: a document is only ever given the keys of the URN it holds.
        update = {"q": {"_id": doc_id, "urn": urn}, "u": {"$set": {FIELD: keys}}}
        reply: Mapping[str, Any] = database.command({"update": name, "updates": [update], "ordered": True})
        updated += int(reply.get("nModified", reply.get("n", 0)))
    return updated


def backfill(database: Database[Any], batch: int = BATCH) -> int:
    """Give every tag document of the tenant's projection its ``urn_keys``, then record the marker; returns how many
    documents were updated (0 when run again). Safe while the job writes: it sets the same value."""
    if ready(database):
        return 0
    updated = sum(_backfill_collection(database, name, batch) for name in COLLECTIONS)
    database[MIGRATIONS_COLLECTION].update_one(
        {"_id": MARKER_ID}, {"$set": {"done_at": datetime.now(UTC), "updated": updated}}, upsert=True
    )
    log.info("projection.urn_keys_backfilled", extra={"database": database.name, "updated": updated})
    return updated
