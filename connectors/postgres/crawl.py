"""One database's crawl: what to emit, in which order, and which offset each record carries.

Order: the database, its schemas, its tables and views, then for each changed table (in the same order) its "tail":
its columns, deletes of columns that disappeared, its foreign-key edges, removals of edges that disappeared. Tables
come before every column so they are published first (columns are ~90% of the volume and travel on the bulk topic).

Offsets: a record of a changed table other than its last carries ``KEEP``, so the stored state does not move until
the last record; the last carries the new offset. A crash in between re-crawls the table next time.

Scope: a task crawls only the database row and the schemas its :class:`~connectors.postgres.tasks.Scope` owns.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import psycopg

from connectors.postgres.catalog import (
    CatalogError,
    ColumnRow,
    TableRow,
    count_tables,
    read_database,
    read_schemas,
    stream_columns,
    stream_tables,
)
from connectors.postgres.config import PostgresCatalogConfig
from connectors.postgres.emit import EventFactory
from connectors.postgres.state import (
    Offset,
    StoredPartition,
    asset_offset,
    changed,
    database_hash,
    database_partition,
    removed,
    schema_hash,
    schema_partition,
    table_hash,
    table_offset,
    table_partition,
)
from connectors.postgres.tasks import Scope
from control.connectors.plugin import FORGET, KEEP, SourceRecord, partition_key
from metalake.events import CloudEvent

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class PendingTable:
    """A changed table whose upsert was emitted and whose tail (columns, edges) comes later."""

    row: TableRow
    path: tuple[str, str, str]
    urn: str
    digest: str
    stored: Offset | None
    upstreams: list[str]

    @property
    def partition(self) -> dict[str, str]:
        return table_partition(*self.path)

    def has_tail(self) -> bool:
        return bool(
            self.row.column_count
            or self.row.foreign_keys
            or removed(self.stored, "columns", ())
            or removed(self.stored, "upstreams", self.upstreams)
        )


@dataclass
class DatabaseCrawl:
    """Crawls one database against the stored offsets; ``seen`` collects the partition keys that still exist."""

    config: PostgresCatalogConfig
    events: EventFactory
    offsets: Mapping[str, Offset]
    scope: Scope = field(default_factory=Scope)
    seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(("tables", "changed", "columns"), 0))
    # The connector's progress across its databases (tables_read, tables_total), shared with the connector.
    progress: dict[str, int] = field(default_factory=dict)

    def run(self, conn: psycopg.Connection[Any], database: str) -> Iterator[SourceRecord]:
        """The records of ``database`` read through ``conn`` (a snapshot), in the order of the module docstring."""
        yield from self._database(conn, database)
        schemas = yield from self._schemas(conn, database)
        self.progress["tables_total"] = self.progress.get("tables_total", 0) + count_tables(conn, schemas)
        pending: list[PendingTable] = []
        for row in stream_tables(conn, schemas, self.config.fetch_size):
            record = self._table(database, row, pending)
            if record is not None:
                yield record
        yield from self._tails(conn, pending)

    def _visit(self, partition: dict[str, str]) -> Offset | None:
        key = partition_key(partition)
        self.seen.add(key)
        return self.offsets.get(key)

    def _database(self, conn: psycopg.Connection[Any], database: str) -> Iterator[SourceRecord]:
        partition = database_partition(database)
        if not self.scope.owns(partition):
            return
        row, urn = read_database(conn), self.events.urn(database)
        digest = database_hash(urn, row)
        if changed(self._visit(partition), digest):
            yield SourceRecord(self.events.database(urn, row), partition, asset_offset(urn, digest, self.version))

    def _schemas(self, conn: psycopg.Connection[Any], database: str) -> Generator[SourceRecord, None, list[str]]:
        """Yields the changed schemas; returns the names of all selected ones (for the table query)."""
        selected: list[str] = []
        for row in read_schemas(conn):
            partition = schema_partition(database, row.name)
            if not self.config.schema_selected(row.name) or not self.scope.owns(partition):
                continue
            selected.append(row.name)
            urn = self.events.urn(database, row.name)
            digest = schema_hash(urn, row)
            if changed(self._visit(partition), digest):
                yield SourceRecord(self.events.schema(urn, row), partition, asset_offset(urn, digest, self.version))
        return selected

    def _table(self, database: str, row: TableRow, pending: list[PendingTable]) -> SourceRecord | None:
        self.counts["tables"] += 1
        self.progress["tables_read"] = self.progress.get("tables_read", 0) + 1
        path = (database, row.schema, row.name)
        stored, urn = self._visit(table_partition(*path)), self.events.urn(*path)
        digest = table_hash(urn, row)
        if not changed(stored, digest):
            return None
        self.counts["changed"] += 1
        upstreams = sorted({self.events.urn(database, schema, table) for _, schema, table in row.foreign_keys})
        table = PendingTable(row, path, urn, digest, stored, upstreams)
        if table.has_tail():
            pending.append(table)
            return SourceRecord(self.events.table(urn, row), table.partition, KEEP)
        return SourceRecord(self.events.table(urn, row), table.partition, self._final(table, []))

    def _tails(self, conn: psycopg.Connection[Any], pending: Sequence[PendingTable]) -> Iterator[SourceRecord]:
        if not pending:
            return
        # Both streams are in (schema, table) order, so a table's columns are the next rows while the oid matches.
        columns = stream_columns(conn, [t.row.oid for t in pending], self.config.fetch_size)
        upcoming = next(columns, None)
        for table in pending:
            held: list[ColumnRow] = []  # one table's columns at a time: bounded by PostgreSQL's 1600-column limit
            while upcoming is not None and upcoming.table_oid == table.row.oid:
                held.append(upcoming)
                upcoming = next(columns, None)
            yield from self._tail(table, held)
        if upcoming is not None:
            raise CatalogError(
                "database-error", f"column stream out of step with the table stream at table oid {upcoming.table_oid}"
            )

    def _tail(self, table: PendingTable, columns: list[ColumnRow]) -> Iterator[SourceRecord]:
        self.counts["columns"] += len(columns)
        names = [c.name for c in columns]
        database = table.path[0]
        out: list[CloudEvent] = [self.events.column(table.path, c) for c in columns]
        out += [self.events.deleted(self.events.urn(*table.path, n)) for n in removed(table.stored, "columns", names)]
        out += [
            self.events.edge_added(table.urn, self.events.urn(database, schema, name), constraint)
            for constraint, schema, name in table.row.foreign_keys
        ]
        out += [self.events.edge_removed(table.urn, up) for up in removed(table.stored, "upstreams", table.upstreams)]
        if not out:  # has_tail() promised records; the snapshot makes this unreachable unless the queries disagree
            raise CatalogError(
                "database-error", f"no columns or edges read for table oid {table.row.oid} that has a tail"
            )
        final = self._final(table, names)
        for i, event in enumerate(out, 1):
            yield SourceRecord(event, table.partition, final if i == len(out) else KEEP)

    def _final(self, table: PendingTable, columns: list[str]) -> dict[str, Any]:
        return table_offset(table.urn, table.digest, self.version, columns, table.upstreams)

    @property
    def version(self) -> int:
        return self.events.version


def deletions(events: EventFactory, gone: Sequence[StoredPartition]) -> Iterator[SourceRecord]:
    """Deletes for partitions that no longer exist: the asset, its recorded columns and edges; then forget it.

    Every record but the last keeps the stored offset; the last carries ``FORGET`` (forget the partition).
    """
    for part in gone:
        urn = str(part.urn)
        out = [events.deleted(urn), *(events.deleted(c) for c in part.column_urns())]
        out += [events.edge_removed(urn, up) for up in part.offset.get("upstreams") or ()]
        for i, event in enumerate(out, 1):
            yield SourceRecord(event, part.partition, FORGET if i == len(out) else KEEP)
