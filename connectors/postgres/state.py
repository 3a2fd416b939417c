"""Incremental state of the crawler: partitions, offsets, fingerprints and what changed. Pure: no I/O.

Partitions: one per database ``{"database"}``, per schema ``{"database", "schema"}`` and per table or view
``{"database", "schema", "table"}``. Each offset records the asset's URN (so a vanished partition can be deleted
without parsing its key), the fingerprint ``hash`` of what was emitted, and the crawl ``version`` that emitted it.
A table's offset also lists its ``columns`` and the ``upstreams`` of its foreign keys, so the next crawl can delete
the columns and lineage edges that disappeared.
"""

from __future__ import annotations

import hashlib
import json
import logging
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from connectors.postgres.catalog import DatabaseRow, SchemaRow, TableRow
from control.connectors.plugin import partition_key
from metalake.urn import AssetUrn, InvalidUrn

log = logging.getLogger(__name__)

Offset = Mapping[str, Any]


def fingerprint(*parts: Any) -> str:  # noqa: ANN401
    """SHA-256 (hex) of JSON-encodable parts; a change to any part changes the result."""
    text = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def database_hash(urn: str, row: DatabaseRow) -> str:
    return fingerprint(urn, row.owner, row.comment, row.encoding)


def schema_hash(urn: str, row: SchemaRow) -> str:
    return fingerprint(urn, row.owner, row.comment)


def table_hash(urn: str, row: TableRow) -> str:
    """The table's definition, comment, columns (through the server's digest) and foreign keys.

    ``estimated_rows`` is left out on purpose: it moves with every ANALYZE, and a change to it alone must not re-emit
    the table and all of its columns. The URN is in, so moving to another platform or instance re-emits everything.
    """
    parts: list[Any] = [
        urn, row.relkind, row.comment, row.owner, row.is_partition, row.column_count, row.columns_digest,
        [list(fk) for fk in row.foreign_keys],
    ]  # fmt: skip
    if row.definition_digest is not None:  # views only, so a table's hash is what it was before views had lineage
        parts.append(row.definition_digest)
    return fingerprint(*parts)


def crawl_version(offsets: Mapping[str, Offset], now_ms: int) -> int:
    """The version of this crawl's events: now, but always above every version a previous crawl emitted."""
    newest = now_ms - 1
    for offset in offsets.values():
        version = offset.get("version")
        if isinstance(version, int) and version > newest:
            newest = version
    return max(now_ms, newest + 1)


def database_partition(database: str) -> dict[str, str]:
    return {"database": database}


def schema_partition(database: str, schema: str) -> dict[str, str]:
    return {"database": database, "schema": schema}


def table_partition(database: str, schema: str, table: str) -> dict[str, str]:
    return {"database": database, "schema": schema, "table": table}


def asset_offset(urn: str, digest: str, version: int) -> dict[str, Any]:
    return {"urn": urn, "hash": digest, "version": version}


def table_offset(
    urn: str,
    digest: str,
    version: int,
    columns: list[str],
    upstreams: list[str],
    column_upstreams: Mapping[str, list[str]] | None = None,
) -> dict[str, Any]:
    """``column_upstreams`` (views): each column's upstream column URNs, so edges that went away can be removed."""
    offset = {**asset_offset(urn, digest, version), "columns": columns, "upstreams": upstreams}
    if column_upstreams:
        offset["column_upstreams"] = {name: list(ups) for name, ups in column_upstreams.items() if ups}
    return offset


def stored_column_upstreams(stored: Offset | None) -> dict[str, list[str]]:
    """The column edges a previous crawl recorded for a view: column name -> upstream column URNs."""
    recorded = (stored or {}).get("column_upstreams")
    if not isinstance(recorded, Mapping):
        return {}
    return {str(name): [str(u) for u in ups] for name, ups in recorded.items() if isinstance(ups, list)}


def changed(stored: Offset | None, digest: str) -> bool:
    return stored is None or stored.get("hash") != digest


def removed(stored: Offset | None, field: str, current: Iterable[str]) -> list[str]:
    """Names recorded under ``field`` of the stored offset that are not in ``current``, in their recorded order."""
    if stored is None:
        return []
    now = set(current)
    return [name for name in stored.get(field) or () if name not in now]


@dataclass(frozen=True)
class StoredPartition:
    """A partition a previous crawl recorded: its key, the URN it stands for, and its offset."""

    key: str
    urn: AssetUrn
    offset: Offset

    @property
    def partition(self) -> dict[str, str]:
        return dict(zip(("database", "schema", "table"), self.urn.path, strict=False))

    def column_urns(self) -> list[str]:
        return [str(self.urn.child(name)) for name in self.offset.get("columns") or ()]

    def column_edges(self) -> list[tuple[str, str]]:
        """(column URN, upstream column URN) of the column edges recorded for a view."""
        return [
            (str(self.urn.child(name)), up) for name, ups in stored_column_upstreams(self.offset).items() for up in ups
        ]


def group_by_database(offsets: Mapping[str, Offset]) -> dict[str, list[StoredPartition]]:
    """Stored partitions per database, tables before schemas before the database (the order to delete them in).

    An offset without a readable URN was not written by this crawler; it is skipped, with a warning.
    """
    grouped: dict[str, list[StoredPartition]] = defaultdict(list)
    for key, offset in offsets.items():
        try:
            urn = AssetUrn.parse(str(offset.get("urn")))
        except InvalidUrn:
            log.warning("postgres.offset_ignored", extra={"partition": key})
            continue
        if partition_key(dict(zip(("database", "schema", "table"), urn.path, strict=False))) != key:
            log.warning("postgres.offset_ignored", extra={"partition": key})
            continue
        grouped[urn.path[0]].append(StoredPartition(key, urn, offset))
    for parts in grouped.values():
        parts.sort(key=lambda p: -len(p.urn.path))
    return dict(grouped)


def stale(stored: Sequence[StoredPartition], seen: set[str]) -> list[StoredPartition]:
    """The stored partitions that this crawl did not see: their assets are gone."""
    return [p for p in stored if p.key not in seen]
