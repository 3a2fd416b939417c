"""The PostgreSQL catalog crawler against the stack's real PostgreSQL: full crawl, reruns, ALTER and DROP.

Each test gets a fresh database (300 tables of 8 columns in three schemas, comments, foreign keys, two views), dropped
at the end. Offsets are fed back the way the runtime stores them: the last offset per partition wins, ``None`` forgets.
"""

from __future__ import annotations

import secrets
import socket
import threading
from collections import Counter
from collections.abc import Iterator, Mapping
from typing import Any

import pytest

from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from connectors.postgres.catalog import CatalogError, list_databases
from control.connectors.plugin import FORGET, ConnectorContext, SourceAccess, SourceRecord, partition_key
from control.connectors.reasons import public_failure
from metalake.events import decode_record, spec_for
from metalake.net.ssrf import AddressGuard
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tests._support.pgit import connect, scratch_database

pytestmark = pytest.mark.integration

SCHEMAS = ("sales", "hr", "ops")
TABLES_PER_SCHEMA = 100
# Every 10th table of a schema (t001, t011, ...) references the one before it: 30 foreign keys.
FK_TABLES = {f"t{i:03d}" for i in range(1, TABLES_PER_SCHEMA, 10)}

_POPULATE = """
DO $$
DECLARE s text; i int;
BEGIN
  FOREACH s IN ARRAY ARRAY['sales', 'hr', 'ops'] LOOP
    EXECUTE format('CREATE SCHEMA %I', s);
    EXECUTE format('COMMENT ON SCHEMA %I IS %L', s, 'schema ' || s);
    FOR i IN 0..99 LOOP
      EXECUTE format(
        'CREATE TABLE %I.%I (id bigint PRIMARY KEY, name varchar(64) NOT NULL, amount numeric(12,2), created_at '
        'timestamptz NOT NULL DEFAULT now(), note text, flag boolean, ref_id bigint, payload jsonb)',
        s, 't' || lpad(i::text, 3, '0'));
      IF i % 10 = 1 THEN
        EXECUTE format('ALTER TABLE %I.%I ADD CONSTRAINT %I FOREIGN KEY (ref_id) REFERENCES %I.%I (id)',
          s, 't' || lpad(i::text, 3, '0'), 'fk_' || s || '_' || i, s, 't' || lpad((i - 1)::text, 3, '0'));
      END IF;
    END LOOP;
  END LOOP;
END $$;
COMMENT ON TABLE sales.t000 IS 'Orders, one row per order';
COMMENT ON COLUMN sales.t000.amount IS 'Total in EUR';
CREATE VIEW sales.v_big AS SELECT id, amount FROM sales.t000 WHERE amount > 100;
CREATE MATERIALIZED VIEW hr.mv_names AS SELECT id, name FROM hr.t000;
"""


@pytest.fixture
def database(settings: Settings, stack: StackManager) -> Iterator[str]:
    with scratch_database(settings, _POPULATE) as name:
        yield name


# The stack's PostgreSQL listens on loopback with trust authentication: what the local stack lets connectors reach
# (connect.ssrf_allow, connect.allow_passwordless_sources), never the default.
LOCAL = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]), allow_passwordless=True)


def _config(settings: Settings, database: str, **kw: Any) -> PostgresCatalogConfig:
    values = {
        "host": "127.0.0.1", "port": settings.stack.ports.postgres, "user": "metalake", "password": "unused-trust",
        "instance": "it", "databases": [database], "fetch_size": 500,
        # The stack's PostgreSQL has no TLS: the explicit opt-out from verify-full (the default).
        "sslmode": "disable", **kw,
    }  # fmt: skip
    return PostgresCatalogConfig(**values)


def _crawler(settings: Settings, database: str, access: SourceAccess = LOCAL) -> PostgresCatalogConnector:
    return PostgresCatalogConnector(_config(settings, database), ConnectorContext("acme", "pg", access=access))


def _store(offsets: Mapping[str, Mapping[str, Any]], records: list[SourceRecord]) -> dict[str, Mapping[str, Any]]:
    out = dict(offsets)
    for record in records:
        key = partition_key(record.partition)
        if record.forgets:
            out.pop(key, None)
        elif isinstance(record.offset, Mapping):
            out[key] = record.offset
    return out


def _kinds(records: list[SourceRecord]) -> Counter[str]:
    return Counter(str(r.event.data.get("kind") or r.event.type) for r in records)


def _urn(database: str, *path: str) -> str:
    return asset_urn("postgres", "it", database, *path)


def test_full_crawl(settings: Settings, database: str) -> None:
    records = list(_crawler(settings, database).poll({}))

    columns = 300 * 8 + 2 + 2
    assert _kinds(records) == {
        "database": 1,
        "schema": 4,  # public, sales, hr, ops
        "table": 300,
        "view": 2,
        "column": columns,
        # 30 foreign keys; each view: one edge from the table it reads, one per column from the column it shows.
        "io.metalake.lineage.edge.added.v1": 30 + 2 * 3,
    }
    # Tables and views first, then the tails; every event decodes as the Kafka record it becomes.
    kinds = [r.event.data.get("kind") for r in records]
    assert max(i for i, k in enumerate(kinds) if k in ("table", "view")) < kinds.index("column")
    for record in records:
        event = record.event
        assert decode_record(event.key, event.value(), event.headers()) == event
    classes = {(r.event.data.get("kind"), spec_for(r.event.type).topic_class(r.event.data)) for r in records}
    assert ("column", "bulk") in classes
    assert ("column", "priority") not in classes
    assert ("table", "priority") in classes
    versions = {r.event.data["version"] for r in records}
    assert len(versions) == 1

    by_urn = {r.event.data["urn"]: r.event.data for r in records if r.event.type.endswith("upserted.v1")}
    table = by_urn[_urn(database, "sales", "t000")]
    assert table["kind"] == "table"
    assert table["name"] == "t000"
    assert table["description"] == "Orders, one row per order"
    assert table["properties"]["relkind"] == "r"
    assert table["properties"]["owner"] == "metalake"
    amount = by_urn[_urn(database, "sales", "t000", "amount")]
    assert amount == {
        "urn": _urn(database, "sales", "t000", "amount"),
        "version": versions.pop(),
        "kind": "column",
        "name": "amount",
        "description": "Total in EUR",
        "data_type": "numeric(12,2)",
        "properties": {"ordinal": "3", "nullable": "true"},
    }
    assert by_urn[_urn(database, "sales", "t000", "created_at")]["properties"] == {"ordinal": "4", "nullable": "false"}
    assert by_urn[_urn(database, "sales", "t000", "created_at")]["data_type"] == "timestamp with time zone"
    assert by_urn[_urn(database, "sales", "v_big")]["kind"] == "view"
    assert by_urn[_urn(database, "hr", "mv_names")]["properties"]["relkind"] == "m"
    assert by_urn[_urn(database, "sales")]["description"] == "schema sales"

    edges = {
        (r.event.data["urn"], r.event.data["upstream"], r.event.data["transformation"])
        for r in records
        if r.event.type == "io.metalake.lineage.edge.added.v1"
    }
    assert (_urn(database, "hr", "t011"), _urn(database, "hr", "t010"), "foreign_key fk_hr_11") in edges
    assert {e[0].rsplit("/", 1)[1] for e in edges if e[2].startswith("foreign_key")} == FK_TABLES
    assert (_urn(database, "hr", "mv_names"), _urn(database, "hr", "t000"), "materialized view") in edges
    assert (
        _urn(database, "sales", "v_big", "amount"),
        _urn(database, "sales", "t000", "amount"),
        "t000.amount",
    ) in edges

    offsets = _store({}, records)
    assert len(offsets) == 1 + 4 + 302
    t000 = offsets[partition_key({"database": database, "schema": "sales", "table": "t000"})]
    assert t000["columns"] == ["id", "name", "amount", "created_at", "note", "flag", "ref_id", "payload"]


def test_rerun_with_stored_offsets_emits_nothing(settings: Settings, database: str) -> None:
    crawler = _crawler(settings, database)
    offsets = _store({}, list(crawler.poll({})))
    assert list(crawler.poll(offsets)) == []


def test_altered_table_is_reemitted_alone(settings: Settings, database: str) -> None:
    crawler = _crawler(settings, database)
    offsets = _store({}, list(crawler.poll({})))
    with connect(settings, database) as conn:
        conn.execute("ALTER TABLE ops.t050 ADD COLUMN region text")
        conn.execute("ALTER TABLE ops.t050 DROP COLUMN note")
        conn.execute("COMMENT ON TABLE ops.t050 IS 'reshaped'")

    records = list(crawler.poll(offsets))
    table = _urn(database, "ops", "t050")
    upserted = [(r.event.data["kind"], r.event.data["urn"]) for r in records if r.event.type.endswith("upserted.v1")]
    assert upserted[0] == ("table", table)
    assert [u for _, u in upserted[1:]] == [
        f"{table}/{c}" for c in ("id", "name", "amount", "created_at", "flag", "ref_id", "payload", "region")
    ]
    assert records[0].event.data["description"] == "reshaped"
    deleted = [r.event.data["urn"] for r in records if r.event.type == "io.metalake.asset.deleted.v1"]
    assert deleted == [f"{table}/note"]
    assert len(records) == 1 + 8 + 1
    assert {partition_key(r.partition) for r in records} == {
        partition_key({"database": database, "schema": "ops", "table": "t050"})
    }
    assert isinstance(records[-1].offset, Mapping) and "region" in records[-1].offset["columns"]

    assert list(crawler.poll(_store(offsets, records))) == []


def test_dropped_table_is_deleted_and_forgotten(settings: Settings, database: str) -> None:
    crawler = _crawler(settings, database)
    offsets = _store({}, list(crawler.poll({})))
    key = partition_key({"database": database, "schema": "hr", "table": "t099"})
    assert key in offsets
    with connect(settings, database) as conn:
        conn.execute("DROP TABLE hr.t099")

    records = list(crawler.poll(offsets))
    table = _urn(database, "hr", "t099")
    assert [r.event.type for r in records] == ["io.metalake.asset.deleted.v1"] * 9
    assert [r.event.data["urn"] for r in records] == [table] + [
        f"{table}/{c}" for c in ("id", "name", "amount", "created_at", "note", "flag", "ref_id", "payload")
    ]
    assert {partition_key(r.partition) for r in records} == {key}
    assert records[-1].offset is FORGET and not any(r.forgets for r in records[:-1])
    after = _store(offsets, records)
    assert key not in after
    assert len(after) == len(offsets) - 1
    assert list(crawler.poll(after)) == []


def test_database_discovery_lists_connectable_non_template_databases(settings: Settings, database: str) -> None:
    found = list_databases(_config(settings, database), LOCAL)
    assert database in found
    assert "template0" not in found
    assert "template1" not in found


def test_connection_failure_does_not_leak_the_password(settings: Settings, stack: StackManager) -> None:
    secret = f"pw-{secrets.token_hex(8)}"
    config = _config(settings, "no_such_database_here", password=secret)
    with pytest.raises(CatalogError) as info:
        list(PostgresCatalogConnector(config, ConnectorContext("acme", "pg", access=LOCAL)).poll({}))
    assert secret not in str(info.value)
    assert info.value.error_class == "database-error" and "no_such_database_here" in str(info.value)


# -- the SSRF rules against a real server --------------------------------------------------------------------------


def _failure(config: PostgresCatalogConfig, access: SourceAccess) -> CatalogError:
    with pytest.raises(CatalogError) as info:
        list(PostgresCatalogConnector(config, ConnectorContext("acme", "pg", access=access)).poll({}))
    return info.value


def test_without_the_operators_allowance_loopback_is_refused(settings: Settings, database: str) -> None:
    for host in ("127.0.0.1", "localhost"):
        failure = _failure(_config(settings, database, host=host), SourceAccess())
        assert failure.error_class == "address-refused"


def test_by_default_a_server_without_tls_is_refused_before_any_password(settings: Settings, database: str) -> None:
    # Issue 21, item 19: sslmode verify-full is the default; the stack's PostgreSQL has no TLS, so only a configuration
    # that opts out explicitly (the others here: "disable") reaches it.
    config = _config(settings, database)
    config = config.model_copy(update={"sslmode": PostgresCatalogConfig.model_fields["sslmode"].default})
    assert config.sslmode == "verify-full"
    failure = _failure(config, LOCAL)
    assert failure.error_class == "tls-failed" and "verify-full" in failure.message


def test_a_server_that_does_not_ask_for_a_password_is_refused(settings: Settings, database: str) -> None:
    # The stack's PostgreSQL trusts loopback: reachable (allowed network), but it never asks for the password.
    strict = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]))
    failure = _failure(_config(settings, database), strict)
    assert failure.error_class == "authentication-failed"


@pytest.fixture
def not_postgres() -> Iterator[int]:
    """A port that accepts and answers like an HTTP server, then hangs up (what a port scan would find)."""
    server = socket.create_server(("127.0.0.1", 0))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                peer, _ = server.accept()
            except TimeoutError:
                continue
            with peer:
                peer.sendall(b"HTTP/1.1 400 Bad Request\r\nServer: internal-admin/2.1\r\n\r\n")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join()
    server.close()


def test_a_closed_port_and_an_open_one_that_is_not_postgresql_look_the_same(
    settings: Settings, database: str, not_postgres: int
) -> None:
    with socket.create_server(("127.0.0.1", 0)) as probe:
        closed = probe.getsockname()[1]  # bound, then closed on leaving the block: nothing listens there
    shown = []
    for port in (closed, not_postgres):
        for sslmode in ("prefer", "disable"):
            failure = _failure(_config(settings, database, port=port, sslmode=sslmode), LOCAL)
            assert failure.error_class == "unreachable"
            text = public_failure(failure)
            assert "internal-admin" not in text and "HTTP" not in text and "refused" not in text.lower()
            shown.append(text.replace(str(port), "PORT"))
    assert len(set(shown)) == 1


# Views the way people write them: search_path resolution, joins, aliases, a CTE, a subquery, an expression of two
# columns, SELECT *, a view over a view, a materialized view, a quoted mixed-case name, a view over pg_catalog.
_VIEWS = """
CREATE SCHEMA shop;
CREATE SCHEMA mart;
CREATE TYPE public.mood AS ENUM ('fine', 'grumpy');
CREATE TABLE shop.customers (id int PRIMARY KEY, name text, email text, feeling mood);
CREATE TABLE shop.orders (id int PRIMARY KEY, customer_id int REFERENCES shop.customers, amount numeric, tax numeric);
CREATE TABLE public."Regions" ("Code" text, label text);
SET search_path = shop, public;
CREATE VIEW mart.spend AS
  WITH per AS (SELECT customer_id, sum(amount + tax) AS gross FROM orders GROUP BY customer_id)
  SELECT c.id, upper(c.name) AS name, per.gross, (SELECT count(*) FROM orders o WHERE o.customer_id = c.id) AS n
  FROM customers c JOIN per ON per.customer_id = c.id;
CREATE VIEW mart.everything AS SELECT * FROM customers;
CREATE MATERIALIZED VIEW mart.big_spenders AS SELECT id, gross * 2 AS doubled FROM mart.spend WHERE gross > 100;
CREATE VIEW mart.regions AS SELECT r."Code" AS code, r.label FROM "Regions" r;
CREATE VIEW mart.tables AS SELECT relname FROM pg_class;
RESET search_path;
"""


@pytest.fixture
def views_database(settings: Settings, stack: StackManager) -> Iterator[str]:
    with scratch_database(settings, _VIEWS) as name:
        yield name


def _edges(records: list[SourceRecord], suffix: str = "added.v1") -> set[tuple[str, str, str | None]]:
    return {
        (r.event.data["urn"], r.event.data["upstream"], r.event.data.get("transformation"))
        for r in records
        if r.event.type == f"io.metalake.lineage.edge.{suffix}"
    }


def test_view_lineage_from_the_definitions(settings: Settings, views_database: str) -> None:
    db = views_database
    crawler = _crawler(settings, db)
    records = list(crawler.poll({}))
    edges = {(down, up) for down, up, _ in _edges(records)}
    spend, customers, orders = _urn(db, "mart", "spend"), _urn(db, "shop", "customers"), _urn(db, "shop", "orders")
    view_edges = {e for e in edges if "/mart/" in e[0]}
    assert view_edges == {
        (spend, customers),
        (spend, orders),
        (f"{spend}/id", f"{customers}/id"),
        (f"{spend}/name", f"{customers}/name"),
        (f"{spend}/gross", f"{orders}/amount"),  # sum(amount + tax) through the CTE: two sources
        (f"{spend}/gross", f"{orders}/tax"),
        # count(*) of a correlated subquery has no source column
        (_urn(db, "mart", "everything"), customers),  # PostgreSQL expanded the star when the view was created
        *((_urn(db, "mart", "everything", c), f"{customers}/{c}") for c in ("id", "name", "email", "feeling")),
        (_urn(db, "mart", "big_spenders"), spend),
        (_urn(db, "mart", "big_spenders", "id"), f"{spend}/id"),
        (_urn(db, "mart", "big_spenders", "doubled"), f"{spend}/gross"),
        (_urn(db, "mart", "regions"), _urn(db, "public", "Regions")),
        (_urn(db, "mart", "regions", "code"), _urn(db, "public", "Regions", "Code")),
        (_urn(db, "mart", "regions", "label"), _urn(db, "public", "Regions", "label")),
        # mart.tables reads pg_catalog.pg_class: PostgreSQL records no dependency on its pinned system catalogs,
        # and the crawler trusts the catalog's dependencies, so that view has no edge.
    }
    transformations = {(d, t) for d, _, t in _edges(records)}
    assert (_urn(db, "mart", "big_spenders"), "materialized view") in transformations
    assert (f"{spend}/gross", "per.gross") in transformations
    # Every event is a valid Kafka record of its type.
    for record in records:
        event = record.event
        assert decode_record(event.key, event.value(), event.headers()) == event

    # Unchanged: nothing. Redefined: the view's old edges are removed, the new ones added, the rest untouched.
    offsets = _store({}, records)
    assert list(crawler.poll(offsets)) == []
    with connect(settings, db) as conn:
        conn.execute('CREATE OR REPLACE VIEW mart.regions AS SELECT label AS code, label FROM public."Regions"')
    again = list(crawler.poll(offsets))
    assert {partition_key(r.partition) for r in again} == {
        partition_key({"database": db, "schema": "mart", "table": "regions"})
    }
    assert {(d, u) for d, u, _ in _edges(again, "removed.v1")} == {
        (_urn(db, "mart", "regions", "code"), _urn(db, "public", "Regions", "Code"))
    }
    assert (_urn(db, "mart", "regions", "code"), _urn(db, "public", "Regions", "label")) in {
        (d, u) for d, u, _ in _edges(again)
    }
    offsets = _store(offsets, again)
    assert list(crawler.poll(offsets)) == []

    with connect(settings, db) as conn:
        conn.execute("DROP MATERIALIZED VIEW mart.big_spenders")
    dropped = list(crawler.poll(offsets))
    big = _urn(db, "mart", "big_spenders")
    assert {(d, u) for d, u, _ in _edges(dropped, "removed.v1")} == {
        (big, spend), (f"{big}/id", f"{spend}/id"), (f"{big}/doubled", f"{spend}/gross"),
    }  # fmt: skip
    assert dropped[-1].forgets


def test_reading_views_leaves_column_types_as_the_search_path_shows_them(
    settings: Settings, views_database: str
) -> None:
    # read_views empties search_path for its reads only: the columns read after it keep public's type unqualified.
    records = list(_crawler(settings, views_database).poll({}))
    feeling = _urn(views_database, "shop", "customers", "feeling")
    assert [r.event.data["data_type"] for r in records if r.event.data["urn"] == feeling] == ["mood"]
