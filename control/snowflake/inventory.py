"""A tenant's Snowflake columns with a PII tag, live or withdrawn, from its MongoDB projection.

A column is masked when a live tag matching the PII patterns is on it, or on its table (then every catalogued column
of the table), set directly (``classifications``) or reached along lineage (``propagated_tags``). A column whose
only PII tags are tombstones (removed or unpropagated) is to be unmasked. The data type is the column asset's
``data_type``; its table's asset ``kind`` tells a view. Assets deleted from the catalog are left alone (the column,
or its table, is gone).

Reads only documents of ``snowflake`` URNs, with projections, in batches; past ``max_columns`` columns it stops with
:class:`TooManyColumns` rather than hold an unbounded tenant in the API's memory.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from pymongo.database import Database

from catalog.projection import ASSETS_COLLECTION, CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION
from control.snowflake.masking import SnowflakeColumn
from metalake.urn import AssetUrn, InvalidUrn
from tenants.access.rules import is_masked_tag

PLATFORM = "snowflake"
# URNs per $in: FerretDB answers one $in of 5,000 ids in about a tenth of the time of ten of 500 (each query costs a
# round of its own; bench/snowflake_policies_bench.py); 5,000 URNs stay far below MongoDB's 16 MB.
_ID_BATCH = 5000


class TooManyColumns(ValueError):
    def __init__(self, limit: int) -> None:
        super().__init__(f"more than {limit} Snowflake columns carry or carried a PII tag (masking.max_columns)")
        self.limit = limit


@dataclass(frozen=True)
class Inventory:
    masked: tuple[SnowflakeColumn, ...]
    unmasked: tuple[SnowflakeColumn, ...]


def urn_prefix(account: str | None) -> str:
    """The URN prefix of the platform's assets, or of one account's."""
    base = f"urn:metalake:{PLATFORM}:"
    return base if account is None else base + quote(account, safe="") + "/"


def _batches(values: Sequence[str], size: int) -> Iterator[Sequence[str]]:
    for start in range(0, len(values), size):
        yield values[start : start + size]


def _tagged(db: Database[dict[str, Any]], prefix: str, patterns: Sequence[str]) -> tuple[set[str], set[str]]:
    """URNs (columns and tables) with a live PII tag, and URNs with a withdrawn one."""
    live: set[str] = set()
    withdrawn: set[str] = set()
    query = {"urn": {"$regex": "^" + re.escape(prefix)}}
    for name in (CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION):
        for doc in db[name].find(query, {"_id": 0, "urn": 1, "tag": 1, "deleted": 1}):
            urn, tag = doc.get("urn"), doc.get("tag")
            if not isinstance(urn, str) or not isinstance(tag, str) or not is_masked_tag(tag, patterns):
                continue
            (withdrawn if doc.get("deleted") else live).add(urn)
    return live, withdrawn


def _parse(urn: str) -> AssetUrn | None:
    try:
        parsed = AssetUrn.parse(urn)
    except InvalidUrn:
        return None
    return parsed if parsed.platform == PLATFORM and len(parsed.path) in (3, 4) else None


def _columns_of_tables(
    db: Database[dict[str, Any]], prefix: str, tables: set[str], max_columns: int
) -> dict[str, str | None]:
    """The live column assets under these table URNs: ``{urn: data_type}``. One scan of the platform's (or the
    account's) assets: FerretDB evaluates a ``$or`` of prefix regexes row by row (250 tables: 20 s, against 0.4 s for
    one scan of 5,500 assets), so the tables are matched here instead."""
    out: dict[str, str | None] = {}
    query = {"urn": {"$regex": "^" + re.escape(prefix)}, "deleted": {"$ne": True}}
    for doc in db[ASSETS_COLLECTION].find(query, {"_id": 0, "urn": 1, "data_type": 1}):
        urn = doc.get("urn")
        if isinstance(urn, str) and urn.rsplit("/", 1)[0] in tables:
            out[urn] = doc.get("data_type") if isinstance(doc.get("data_type"), str) else None
            if len(out) > max_columns:
                raise TooManyColumns(max_columns)
    return out


def _assets(db: Database[dict[str, Any]], urns: Iterable[str]) -> dict[str, dict[str, Any]]:
    """These assets by URN (``kind``, ``data_type``, ``deleted``), in as few ``$in`` queries as possible."""
    out: dict[str, dict[str, Any]] = {}
    for batch in _batches(sorted(urns), _ID_BATCH):
        projection = {"kind": 1, "data_type": 1, "deleted": 1}
        for doc in db[ASSETS_COLLECTION].find({"_id": {"$in": list(batch)}}, projection):
            out[str(doc["_id"])] = doc
    return out


def _column(urn: str, data_type: str | None, views: set[str]) -> SnowflakeColumn:
    parsed = AssetUrn.parse(urn)
    database, schema, table, column = parsed.path
    view = urn.rsplit("/", 1)[0] in views
    return SnowflakeColumn(parsed.instance, database, schema, table, column, data_type, urn, view)


def load_inventory(
    db: Database[dict[str, Any]], *, patterns: Sequence[str], account: str | None = None, max_columns: int
) -> Inventory:
    """The tenant's (``db``: its projection database) Snowflake columns to mask and to unmask."""
    live, withdrawn = _tagged(db, urn_prefix(account), patterns)
    parsed = {u: p for u in live | withdrawn if (p := _parse(u)) is not None}
    if len(parsed) > max_columns:
        raise TooManyColumns(max_columns)

    def kinds(urns: set[str], depth: int) -> set[str]:
        return {u for u in urns if u in parsed and len(parsed[u].path) == depth}

    # Columns under a tagged table: live under a live table tag, withdrawn under a withdrawn one.
    live_tables, gone_tables = kinds(live, 3), kinds(withdrawn, 3) - live
    under: dict[str, str | None] = {}
    if live_tables or gone_tables:
        under = _columns_of_tables(db, urn_prefix(account), live_tables | gone_tables, max_columns)
    under_live = {u for u in under if u.rsplit("/", 1)[0] in live_tables}
    if len(under) + len(parsed) > max_columns:
        raise TooManyColumns(max_columns)
    direct = kinds(live, 4) | kinds(withdrawn, 4)
    tables_of = {u.rsplit("/", 1)[0] for u in direct | under.keys()}
    # One pass for the directly tagged columns (type, deleted) and every table involved (a view?).
    assets = _assets(db, (direct - under.keys()) | tables_of)
    types = dict(under)
    for urn in direct - under.keys():
        doc = assets.get(urn)
        # A column the catalog deleted is gone from the table: nothing to set or unset. One never catalogued as an
        # asset (a tag sent before its asset) is still masked, its type unknown.
        if doc is not None and doc.get("deleted"):
            continue
        data_type = doc.get("data_type") if doc is not None else None
        types[urn] = data_type if isinstance(data_type, str) else None
    masked_urns = {u for u in types if u in under_live or u in live}
    views = {t for t in tables_of if (assets.get(t) or {}).get("kind") == "view"}
    masked = tuple(sorted(_column(u, types[u], views) for u in masked_urns))
    unmasked = tuple(sorted(_column(u, types[u], views) for u in types.keys() - masked_urns))
    return Inventory(masked, unmasked)
