"""One database's crawl: what to emit, in which order, and which offset each record carries.

Order: the database, its schemas, its tables and views, then for each changed table (in the same order) its "tail":
its columns, deletes of columns that disappeared, its foreign-key edges (a view: the edges from the relations it reads
and from the columns each of its columns is computed from), removals of edges that disappeared. Tables
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
    ViewRow,
    count_tables,
    read_database,
    read_schemas,
    read_views,
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
    stored_column_upstreams,
    table_hash,
    table_offset,
    table_partition,
)
from connectors.postgres.tasks import Scope
from connectors.sqllineage import Lineage, UnparseableSql, lineage
from control.connectors.plugin import FORGET, KEEP, SourceRecord, partition_key
from metalake.events import CloudEvent

log = logging.getLogger(__name__)

VIEW_KINDS = {"v": "view", "m": "materialized view"}


@dataclass(frozen=True)
class ViewLineage:
    """What a changed view reads: the relations (URNs, from the catalog's dependencies) and, when its definition
    parsed, each output column's sources (restricted to those relations) and expression."""

    upstreams: list[str]
    parsed: Lineage | None


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
            or stored_column_upstreams(self.stored)
        )


@dataclass
class DatabaseCrawl:
    """Crawls one database against the stored offsets; ``seen`` collects the partition keys that still exist."""

    config: PostgresCatalogConfig
    events: EventFactory
    offsets: Mapping[str, Offset]
    scope: Scope = field(default_factory=Scope)
    seen: set[str] = field(default_factory=set)
    counts: dict[str, int] = field(
        default_factory=lambda: dict.fromkeys(("tables", "changed", "columns", "views_parsed", "views_unparsed"), 0)
    )
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
        # Before the column stream opens: read_views changes search_path, which that stream's format_type reads.
        views = self._views(conn, pending)
        # Both streams are in (schema, table) order, so a table's columns are the next rows while the oid matches.
        columns = stream_columns(conn, [t.row.oid for t in pending], self.config.fetch_size)
        upcoming = next(columns, None)
        for table in pending:
            held: list[ColumnRow] = []  # one table's columns at a time: bounded by PostgreSQL's 1600-column limit
            while upcoming is not None and upcoming.table_oid == table.row.oid:
                held.append(upcoming)
                upcoming = next(columns, None)
            yield from self._tail(table, held, views.get(table.row.oid))
        if upcoming is not None:
            raise CatalogError(
                "database-error", f"column stream out of step with the table stream at table oid {upcoming.table_oid}"
            )

    def _views(self, conn: psycopg.Connection[Any], pending: Sequence[PendingTable]) -> dict[int, ViewLineage]:
        """The lineage of the changed views: one read of their definitions, each parsed once, only edges kept."""
        oids = [t.row.oid for t in pending if t.row.relkind in VIEW_KINDS]
        if not oids or not self.config.view_lineage:
            return {}
        by_oid = {t.row.oid: t for t in pending}
        return {oid: self._view(by_oid[oid], row) for oid, row in read_views(conn, oids).items()}

    def _view(self, table: PendingTable, row: ViewRow) -> ViewLineage:
        database, schema, name = table.path
        upstreams = sorted({self.events.urn(database, s, t) for s, t, _ in row.sources})
        fields = {"database": database, "schema": schema, "view": name}
        if len(row.definition) > self.config.max_view_definition_chars:
            self.counts["views_unparsed"] += 1
            log.warning("postgres.view_unparsed", extra={**fields, "reason": "definition too long"})
            return ViewLineage(upstreams, None)
        known = {(database, s, t): columns for s, t, columns in row.sources}
        try:
            # read_views qualified every relation but pg_catalog's, so an unqualified name is a pg_catalog one.
            parsed = lineage(
                row.definition, dialect="postgres", database=database, search_path=["pg_catalog"], tables=known
            )
        except UnparseableSql as exc:
            self.counts["views_unparsed"] += 1
            log.warning("postgres.view_unparsed", extra={**fields, "reason": exc.reason})
            return ViewLineage(upstreams, None)
        self.counts["views_parsed"] += 1
        return ViewLineage(upstreams, parsed)

    def _column_sources(
        self, table: PendingTable, columns: list[ColumnRow], view: ViewLineage
    ) -> dict[str, tuple[set[str], str]]:
        """Each view column's upstream column URNs and the expression computing it, by column name."""
        if view.parsed is None:
            return {}
        database = table.path[0]
        outputs = list(view.parsed.columns)
        # A view's columns are its query's output columns in order; by name only if the counts disagree.
        if len(outputs) == len(columns):
            pairs = list(zip(columns, outputs, strict=True))
        else:
            by_name = {o.name: o for o in outputs}
            pairs = [(c, by_name[c.name]) for c in columns if c.name in by_name]
        readable = set(view.upstreams)
        out: dict[str, tuple[set[str], str]] = {}
        for column, output in pairs:
            ups = {
                self.events.urn(database, s.table[1], s.table[2], s.column)
                for s in output.sources
                if self.events.urn(database, s.table[1], s.table[2]) in readable  # the catalog's dependencies rule
            }
            if ups:
                out[column.name] = (ups, output.expression)
        return out

    def _tail(
        self, table: PendingTable, columns: list[ColumnRow], view: ViewLineage | None = None
    ) -> Iterator[SourceRecord]:
        self.counts["columns"] += len(columns)
        names = [c.name for c in columns]
        database = table.path[0]
        out: list[CloudEvent] = [self.events.column(table.path, c) for c in columns]
        out += [self.events.deleted(self.events.urn(*table.path, n)) for n in removed(table.stored, "columns", names)]
        out += [
            self.events.edge_added(table.urn, self.events.urn(database, schema, name), constraint)
            for constraint, schema, name in table.row.foreign_keys
        ]
        upstreams, column_edges = table.upstreams, dict[str, list[str]]()
        if view is not None:
            kind = VIEW_KINDS[table.row.relkind]
            upstreams = sorted({*upstreams, *view.upstreams})
            out += [self.events.lineage_edge(table.urn, up, kind) for up in view.upstreams]
            sources = self._column_sources(table, columns, view)
            for name, (ups, expression) in sources.items():
                column = self.events.urn(*table.path, name)
                out += [self.events.lineage_edge(column, up, expression) for up in sorted(ups)]
            column_edges = {name: sorted(ups) for name, (ups, _) in sources.items()}
        out += [self.events.edge_removed(table.urn, up) for up in removed(table.stored, "upstreams", upstreams)]
        for name, recorded in stored_column_upstreams(table.stored).items():
            now = set(column_edges.get(name, ()))
            column = self.events.urn(*table.path, name)
            out += [self.events.edge_removed(column, up) for up in recorded if up not in now]
        if not out:  # has_tail() promised records; the snapshot makes this unreachable unless the queries disagree
            raise CatalogError(
                "database-error", f"no columns or edges read for table oid {table.row.oid} that has a tail"
            )
        final = table_offset(table.urn, table.digest, self.version, names, upstreams, column_edges)
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
        out += [events.edge_removed(column, up) for column, up in part.column_edges()]
        for i, event in enumerate(out, 1):
            yield SourceRecord(event, part.partition, FORGET if i == len(out) else KEEP)
