"""The tags of the tables an OPA decision asks about (docs/enforcement.md), for a whole batch at once.

Exact and indexed: the tag documents carry ``urn_keys`` (``catalog.urn_keys``: the normalised URN of their asset
and its parent), so a table's tags are the documents whose ``urn_keys`` hold its normalised URN. On MongoDB a batch's
tables are one query per tag collection (``$in``, served by the ``urn_keys`` index), however many tables and columns
the batch names; FerretDB 1.x filters ``$in`` after reading the whole collection, so there each table is one equality
per collection, which it pushes down to its GIN index (measured in docs/benchmarks.md). Trino asks about one table
per request, which is one equality on both. Trino lower-cases names; the source may not: both sides are normalised
alike. Before the tenant's backfill has recorded that every document carries the field, each table is read the old
way (``api.services.enforcement.load_table_tags``: two case-insensitive regex queries per table, which no index
serves), so no tag is ever missed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from pymongo.database import Database

from api.services.enforcement import ColumnRef, Engine, TableTags, column_masks, load_table_tags
from catalog import urn_keys
from metalake.urn import AssetUrn, InvalidUrn


class Lookups:
    """What a process learns once and keeps: the tenants whose backfill is done (it is never undone: a dropped
    database is provisioned anew, and provisioning records it), so the marker is read until it is found, then never
    again; and whether the server serves ``$in`` from an index (asked once)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: set[str] = set()
        self._in_indexed: bool | None = None

    def ready(self, tenant: str, database: Database[Any]) -> bool:
        with self._lock:
            if tenant in self._ready:
                return True
        if not urn_keys.ready(database):
            return False
        with self._lock:
            self._ready.add(tenant)
        return True

    def in_indexed(self, database: Database[Any]) -> bool:
        if self._in_indexed is None:
            self._in_indexed = urn_keys.in_served_by_index(database)
        return self._in_indexed


def _queries(keys: list[str], batched: bool) -> list[dict[str, Any]]:
    live = {"deleted": {"$ne": True}}
    if batched and len(keys) > 1:
        return [{urn_keys.FIELD: {"$in": keys}, **live}]
    return [{urn_keys.FIELD: k, **live} for k in keys]


def load_tags(db: Database[Any], table_urns: Sequence[str], *, batched: bool = True) -> dict[str, TableTags]:
    """The live tags (direct and propagated) of each table and of its columns: per tag collection, one ``$in``
    query for the batch (``batched``), else one equality per table."""
    keys = sorted({urn_keys.normalised(u) for u in table_urns})
    tables: dict[str, set[str]] = {k: set() for k in keys}
    columns: dict[str, dict[str, set[str]]] = {k: {} for k in keys}
    for name in urn_keys.COLLECTIONS:
        for query in _queries(keys, batched):
            for doc in db[name].find(query, {"_id": 0, "urn": 1, "tag": 1}):
                _add(doc, tables, columns)
    found = {k: TableTags(frozenset(tables[k]), {c: frozenset(t) for c, t in columns[k].items()}) for k in keys}
    return {u: found[urn_keys.normalised(u)] for u in table_urns}


def _add(doc: Mapping[str, Any], tables: dict[str, set[str]], columns: dict[str, dict[str, set[str]]]) -> None:
    """File a tag document under the table it is on, or under its table's column."""
    tag, urn = doc.get("tag"), doc.get("urn")
    if not isinstance(tag, str) or not isinstance(urn, str):
        return
    own, *parent = urn_keys.urn_keys(urn)  # from the URN itself, not the stored field
    if own in tables:
        tables[own].add(tag)
    if parent and parent[0] in columns:
        try:
            column = AssetUrn.parse(urn).path[-1].lower()
        except InvalidUrn:
            return
        columns[parent[0]].setdefault(column, set()).add(tag)


def tags_for(db: Database[Any], lookups: Lookups, tenant: str, table_urns: Sequence[str]) -> dict[str, TableTags]:
    """:func:`load_tags` once the tenant's documents all carry ``urn_keys``, else the old way per table."""
    if lookups.ready(tenant, db):
        return load_tags(db, table_urns, batched=lookups.in_indexed(db))
    return {u: load_table_tags(db, u) for u in table_urns}


def batch_masks(
    engine: Engine,
    columns: Sequence[ColumnRef],
    load: Callable[[list[str]], dict[str, TableTags]],
    *,
    user: str,
    groups: Iterable[str],
    patterns: Sequence[str],
) -> list[tuple[int, str]]:
    """``column_masks`` of a batch whose mapped tables are all looked up in one call of ``load`` (none for a user
    who reads PII in clear)."""
    groups = tuple(groups)
    urns: list[str] = []
    if not engine.sees_pii(user, groups):
        mapped = ((engine.source_for(c.catalog), c) for c in columns)
        urns = list(dict.fromkeys(s.table_urn(c.schema, c.table) for s, c in mapped if s is not None))
    loaded = load(urns)
    return column_masks(
        engine,
        columns,
        lambda source, schema, table: loaded[source.table_urn(schema, table)],
        user=user,
        groups=groups,
        patterns=patterns,
    )
