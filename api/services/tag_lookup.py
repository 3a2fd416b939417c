"""The tags of the tables an OPA decision asks about (docs/enforcement.md), for a whole batch at once.

Exact and indexed: the tag documents carry ``urn_keys`` (``metalake.urn_keys``: the normalised URN of their asset
and its parent), so a batch's tables are one query per tag collection, ``urn_keys`` equal to the table's normalised
URN (one table) or ``$in`` the batch's (several), however many tables and columns the batch names. Trino lower-cases
names; the source may not: both sides are normalised alike. Before the tenant's backfill has recorded that every
document carries the field, each table is read the old way (``api.services.enforcement.load_table_tags``: two
case-insensitive regex queries per table, which no index serves), so no tag is ever missed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pymongo.database import Database

from api.services.enforcement import ColumnRef, Engine, TableTags, column_masks, load_table_tags
from metalake import urn_keys
from metalake.urn import AssetUrn, InvalidUrn


class ReadyTenants:
    """The tenants whose backfill is known done (it is never undone: a dropped database is provisioned anew, and
    provisioning records it), so the marker is read until it is found, then never again."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ready: set[str] = set()

    def check(self, tenant: str, database: Database[Any]) -> bool:
        with self._lock:
            if tenant in self._ready:
                return True
        if not urn_keys.ready(database):
            return False
        with self._lock:
            self._ready.add(tenant)
        return True


def load_tags(db: Database[Any], table_urns: Sequence[str]) -> dict[str, TableTags]:
    """The live tags (direct and propagated) of each table and of its columns: one query per tag collection."""
    keys = sorted({urn_keys.normalised(u) for u in table_urns})
    if not keys:
        return {}
    query = {urn_keys.FIELD: keys[0] if len(keys) == 1 else {"$in": keys}, "deleted": {"$ne": True}}
    tables: dict[str, set[str]] = {k: set() for k in keys}
    columns: dict[str, dict[str, set[str]]] = {k: {} for k in keys}
    for name in urn_keys.COLLECTIONS:
        for doc in db[name].find(query, {"_id": 0, "urn": 1, "tag": 1}):
            tag, urn = doc.get("tag"), doc.get("urn")
            if not isinstance(tag, str) or not isinstance(urn, str):
                continue
            own, *parent = urn_keys.urn_keys(urn)  # from the URN itself, not the stored field
            if own in tables:
                tables[own].add(tag)
            if parent and parent[0] in columns:
                try:
                    column = AssetUrn.parse(urn).path[-1].lower()
                except InvalidUrn:
                    continue
                columns[parent[0]].setdefault(column, set()).add(tag)
    found = {k: TableTags(frozenset(tables[k]), {c: frozenset(t) for c, t in columns[k].items()}) for k in keys}
    return {u: found[urn_keys.normalised(u)] for u in table_urns}


def tags_for(db: Database[Any], ready: bool, table_urns: Sequence[str]) -> dict[str, TableTags]:
    """:func:`load_tags` once the tenant's documents all carry ``urn_keys`` (``ready``), else the old way per table."""
    if ready:
        return load_tags(db, table_urns)
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
