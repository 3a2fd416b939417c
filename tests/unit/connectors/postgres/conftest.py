"""A fake catalog for the crawler: rows in, records out, no PostgreSQL.

``FakeCatalog`` replaces the reads the crawl module makes (it imported them by name), ``snapshot``/``list_databases``
in the connector module and the schema listing of the tasks module; each test edits the rows between two polls to
simulate DDL.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest

from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from connectors.postgres import connector as connector_module
from connectors.postgres import crawl as crawl_module
from connectors.postgres import tasks as tasks_module
from connectors.postgres.catalog import ColumnRow, DatabaseRow, SchemaRow, TableRow, ViewRow
from control.connectors.plugin import ConnectorContext, SourceAccess, SourceRecord, partition_key


@dataclass
class FakeDatabase:
    schemas: list[SchemaRow] = field(default_factory=list)
    # oid -> (table row without digest, its columns); the digest is derived like the server does, from the columns.
    tables: dict[int, tuple[TableRow, list[ColumnRow]]] = field(default_factory=dict)
    comment: str | None = None
    column_reads: list[list[int]] = field(default_factory=list)
    # oid -> definition and the relations it reads (read_views' rows); a view without one has no lineage.
    views: dict[int, ViewRow] = field(default_factory=dict)
    view_reads: list[list[int]] = field(default_factory=list)

    def add_table(
        self, oid: int, schema: str, name: str, columns: list[tuple[str, str]], relkind: str = "r",
        fks: list[tuple[str, str, str]] | None = None, comment: str | None = None,
    ) -> None:  # fmt: skip
        rows = [ColumnRow(oid, i, col, typ, False, None) for i, (col, typ) in enumerate(columns, 1)]
        table = TableRow(oid, schema, name, relkind, comment, "owner", 10, False, 0, "", fks or [])
        self.tables[oid] = (table, rows)

    def add_view(
        self, oid: int, schema: str, name: str, columns: list[str], definition: str,
        sources: list[tuple[str, str, list[str]]], relkind: str = "v",
    ) -> None:  # fmt: skip
        self.add_table(oid, schema, name, [(c, "text") for c in columns], relkind=relkind)
        self.views[oid] = ViewRow(oid, definition, sources)

    def rows(self) -> list[TableRow]:
        out = []
        for table, columns in self.tables.values():
            digest = hashlib.sha256(repr(columns).encode()).hexdigest()
            view = self.views.get(table.oid)
            definition = hashlib.md5(view.definition.encode()).hexdigest() if view else table.definition_digest  # noqa: S324
            out.append(table._replace(column_count=len(columns), columns_digest=digest, definition_digest=definition))
        return sorted(out, key=lambda t: (t.schema, t.name))


class FakeCatalog:
    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.databases: dict[str, FakeDatabase] = {}
        fake = self

        @contextmanager
        def snapshot(config: PostgresCatalogConfig, database: str, access: SourceAccess) -> Iterator[str]:
            yield database  # the "connection" is the database name

        def read_database(conn: str) -> DatabaseRow:
            return DatabaseRow(conn, "owner", fake.databases[conn].comment, "UTF8")

        def read_schemas(conn: str) -> list[SchemaRow]:
            return sorted(fake.databases[conn].schemas)

        def stream_tables(conn: str, schemas: list[str], fetch_size: int) -> Iterator[TableRow]:
            return iter([t for t in fake.databases[conn].rows() if t.schema in schemas])

        def count_tables(conn: str, schemas: list[str]) -> int:
            return len([t for t in fake.databases[conn].rows() if t.schema in schemas])

        def stream_columns(conn: str, oids: list[int], fetch_size: int) -> Iterator[ColumnRow]:
            db = fake.databases[conn]
            db.column_reads.append(list(oids))
            return iter([c for t in db.rows() if t.oid in oids for c in db.tables[t.oid][1]])

        def read_views(conn: str, oids: list[int]) -> dict[int, ViewRow]:
            db = fake.databases[conn]
            db.view_reads.append(list(oids))
            return {oid: db.views[oid] for oid in oids if oid in db.views}

        monkeypatch.setattr(connector_module, "snapshot", snapshot)
        monkeypatch.setattr(crawl_module, "read_views", read_views)
        monkeypatch.setattr(tasks_module, "snapshot", snapshot)
        monkeypatch.setattr(tasks_module, "read_schemas", read_schemas)
        monkeypatch.setattr(connector_module, "list_databases", lambda config, access: sorted(fake.databases))
        monkeypatch.setattr(crawl_module, "read_database", read_database)
        monkeypatch.setattr(crawl_module, "read_schemas", read_schemas)
        monkeypatch.setattr(crawl_module, "stream_tables", stream_tables)
        monkeypatch.setattr(crawl_module, "stream_columns", stream_columns)
        monkeypatch.setattr(crawl_module, "count_tables", count_tables)

    def database(self, name: str) -> FakeDatabase:
        db = self.databases[name] = FakeDatabase(schemas=[SchemaRow("public", "owner", None)])
        return db


def _apply(offsets: dict[str, Mapping[str, Any]], records: list[SourceRecord]) -> dict[str, Mapping[str, Any]]:
    """Store offsets as the runtime does: the last position of each partition wins; ``FORGET`` forgets the partition,
    ``KEEP`` leaves it."""
    out = dict(offsets)
    for record in records:
        key = partition_key(record.partition)
        if record.forgets:
            out.pop(key, None)
        elif isinstance(record.offset, Mapping):
            out[key] = record.offset
    return out


def _summary(records: list[SourceRecord]) -> list[tuple[str, str | None, str]]:
    """(event type suffix, kind, urn tail after the instance) per record."""
    out = []
    for r in records:
        kind = r.event.type.removeprefix("io.metalake.").removesuffix(".v1")
        urn = r.event.data["urn"].split(":", 3)[3].split("/", 1)[1]
        out.append((kind, r.event.data.get("kind"), urn))
    return out


@pytest.fixture
def catalog(monkeypatch: pytest.MonkeyPatch) -> FakeCatalog:
    return FakeCatalog(monkeypatch)


@pytest.fixture
def connector() -> PostgresCatalogConnector:
    config = PostgresCatalogConfig(host="db.internal", user="crawler", password="s3cr3t-pw", instance="prod")
    return PostgresCatalogConnector(config, ConnectorContext("acme", "pg"))


@pytest.fixture
def apply() -> Any:
    return _apply


@pytest.fixture
def summary() -> Any:
    return _summary
