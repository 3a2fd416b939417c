"""The crawler's order, offsets and incremental diff, on a fake catalog (see conftest.py)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector, crawl
from connectors.postgres.catalog import SchemaRow
from connectors.postgres.emit import DELETED, EDGE_ADDED, EDGE_REMOVED
from control.connectors.plugin import FORGET, KEEP, ConnectorContext, partition_key

ORDERS_KEY = partition_key({"database": "shop", "schema": "public", "table": "orders"})


def _shop(catalog: Any) -> Any:
    db = catalog.database("shop")
    db.add_table(
        2, "public", "orders", [("id", "bigint"), ("customer_id", "integer")], fks=[("fk_c", "public", "customers")]
    )
    db.add_table(1, "public", "customers", [("id", "integer"), ("email", "text")], comment="people")
    db.add_table(3, "public", "empty", [])
    db.add_table(4, "public", "v_orders", [("id", "bigint")], relkind="v")
    return db


def test_first_crawl_order_and_offsets(catalog: Any, connector: PostgresCatalogConnector, summary: Any) -> None:
    _shop(catalog)
    records = list(connector.poll({}))
    assert summary(records) == [
        ("asset.upserted", "database", "shop"),
        ("asset.upserted", "schema", "shop/public"),
        ("asset.upserted", "table", "shop/public/customers"),
        ("asset.upserted", "table", "shop/public/empty"),
        ("asset.upserted", "table", "shop/public/orders"),
        ("asset.upserted", "view", "shop/public/v_orders"),
        ("asset.upserted", "column", "shop/public/customers/id"),
        ("asset.upserted", "column", "shop/public/customers/email"),
        ("asset.upserted", "column", "shop/public/orders/id"),
        ("asset.upserted", "column", "shop/public/orders/customer_id"),
        ("lineage.edge.added", None, "shop/public/orders"),
        ("asset.upserted", "column", "shop/public/v_orders/id"),
    ]
    with_offset = [
        (r.event.data["urn"].rsplit("/", 1)[1], r.event.type) for r in records if isinstance(r.offset, Mapping)
    ]
    # The new offset of a table rides on its last record; an empty table has only its upsert.
    assert with_offset == [
        ("shop", "io.metalake.asset.upserted.v1"),
        ("public", "io.metalake.asset.upserted.v1"),
        ("empty", "io.metalake.asset.upserted.v1"),
        ("email", "io.metalake.asset.upserted.v1"),
        ("orders", EDGE_ADDED),
        ("id", "io.metalake.asset.upserted.v1"),
    ]
    edge = records[10].event.data
    assert edge["upstream"].endswith("/shop/public/customers")
    assert edge["transformation"] == "foreign_key fk_c"
    assert {r.event.data["version"] for r in records} == {records[0].event.data["version"]}
    assert {r.event.source for r in records} == {"/tenants/acme/connectors/pg"}
    assert isinstance(records[-1].offset, Mapping)
    last = dict(records[-1].offset)
    assert len(last.pop("hash")) == 64
    assert last == {
        "urn": "urn:metalake:postgres:prod/shop/public/v_orders",
        "version": records[0].event.data["version"],
        "columns": ["id"],
        "upstreams": [],
    }


def test_rerun_without_change_emits_nothing_and_reads_no_column(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any
) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    db.column_reads.clear()
    assert list(connector.poll(offsets)) == []
    assert db.column_reads == []


def test_changed_table_reemits_it_with_deleted_column_and_removed_edge(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any, summary: Any
) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    old = offsets[ORDERS_KEY]
    db.add_table(2, "public", "orders", [("id", "bigint"), ("total", "numeric")])  # customer_id and its FK are gone
    records = list(connector.poll(offsets))
    assert summary(records) == [
        ("asset.upserted", "table", "shop/public/orders"),
        ("asset.upserted", "column", "shop/public/orders/id"),
        ("asset.upserted", "column", "shop/public/orders/total"),
        ("asset.deleted", None, "shop/public/orders/customer_id"),
        ("lineage.edge.removed", None, "shop/public/orders"),
    ]
    assert records[-1].event.type == EDGE_REMOVED
    # Until the last record the stored offset is kept, so a crash in between re-crawls the table.
    assert [r.offset for r in records[:-1]] == [KEEP] * 4
    assert isinstance(records[-1].offset, Mapping) and records[-1].offset != old
    assert records[-1].offset["columns"] == ["id", "total"]
    assert records[-1].offset["upstreams"] == []
    assert records[0].event.data["version"] > old["version"]
    assert list(connector.poll(apply(offsets, records))) == []


def test_comment_change_alone_reemits_the_table(catalog: Any, connector: PostgresCatalogConnector, apply: Any) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    db.add_table(1, "public", "customers", [("id", "integer"), ("email", "text")], comment="customers")
    records = list(connector.poll(offsets))
    assert [r.event.data.get("kind") for r in records] == ["table", "column", "column"]
    assert records[0].event.data["description"] == "customers"


def test_dropped_table_and_schema_are_deleted_and_forgotten(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any, summary: Any
) -> None:
    db = _shop(catalog)
    db.schemas.append(SchemaRow("staging", "owner", None))
    db.add_table(9, "staging", "raw", [("a", "text")])
    offsets = apply({}, list(connector.poll({})))
    del db.tables[2]  # orders
    del db.tables[9]
    db.schemas.pop()
    records = list(connector.poll(offsets))
    assert summary(records) == [
        ("asset.deleted", None, "shop/public/orders"),
        ("asset.deleted", None, "shop/public/orders/id"),
        ("asset.deleted", None, "shop/public/orders/customer_id"),
        ("lineage.edge.removed", None, "shop/public/orders"),
        ("asset.deleted", None, "shop/staging/raw"),
        ("asset.deleted", None, "shop/staging/raw/a"),
        ("asset.deleted", None, "shop/staging"),
    ]
    assert [r.offset for r in records] == [KEEP, KEEP, KEEP, FORGET, KEEP, FORGET, FORGET]
    after = apply(offsets, records)
    assert ORDERS_KEY not in after
    assert partition_key({"database": "shop", "schema": "staging"}) not in after
    assert list(connector.poll(after)) == []


def test_a_database_that_is_gone_is_deleted_whole(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any
) -> None:
    _shop(catalog)
    catalog.database("other").add_table(1, "public", "t", [("c", "int")])
    offsets = apply({}, list(connector.poll({})))
    del catalog.databases["other"]
    records = list(connector.poll(offsets))
    assert [(r.event.type, r.event.data["urn"].split("/", 1)[1]) for r in records] == [
        (DELETED, "other/public/t"),
        (DELETED, "other/public/t/c"),
        (DELETED, "other/public"),
        (DELETED, "other"),
    ]
    assert set(apply(offsets, records)) == set(apply({}, list(connector.poll({}))))


def test_a_failed_database_deletes_nothing(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    del catalog.databases["shop"].tables[2]

    def broken(conn: str, schemas: list[str], fetch_size: int) -> Any:
        yield from ()
        raise RuntimeError("connection lost")

    monkeypatch.setattr(crawl, "stream_tables", broken)
    emitted = []
    with pytest.raises(RuntimeError):
        for record in connector.poll(offsets):
            emitted.append(record)
    assert all(r.event.type != DELETED for r in emitted)


def test_excluded_schemas_are_not_crawled(catalog: Any, apply: Any) -> None:
    db = catalog.database("shop")
    db.schemas += [
        SchemaRow("pg_catalog", "owner", None),
        SchemaRow("pg_toast", "o", None),
        SchemaRow("tmp_x", "o", None),
    ]
    db.add_table(1, "pg_catalog", "pg_class", [("oid", "oid")])
    db.add_table(2, "tmp_x", "t", [("a", "int")])
    config = PostgresCatalogConfig(host="h", user="u", password="pw", instance="i", exclude_schemas=["pg_*", "tmp_*"])
    records = list(PostgresCatalogConnector(config, ConnectorContext("acme", "pg")).poll({}))
    assert [r.event.data["urn"].split("/", 1)[1] for r in records] == ["shop", "shop/public"]


def test_version_is_above_every_stored_version(catalog: Any, connector: PostgresCatalogConnector, apply: Any) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    future = 10**15  # a clock that went backwards since: the stored versions are ahead of now
    offsets = {k: {**v, "version": future} for k, v in offsets.items()}
    db.comment = "changed"
    records = list(connector.poll(offsets))
    assert [r.event.data["version"] for r in records] == [future + 1]


def test_columns_are_streamed_one_table_at_a_time(
    catalog: Any, connector: PostgresCatalogConnector, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = catalog.database("big")
    for oid in range(1, 51):
        db.add_table(oid, "public", f"t{oid:02d}", [(f"c{i}", "int") for i in range(20)])
    consumed = 0
    original = crawl.stream_columns

    def counting(conn: str, oids: list[int], fetch_size: int) -> Any:
        nonlocal consumed
        for row in original(conn, oids, fetch_size):
            consumed += 1
            yield row

    monkeypatch.setattr(crawl, "stream_columns", counting)
    records = connector.poll({})
    for record in records:
        if record.event.data.get("kind") == "column":
            break
    # The first column is out while only the first table's 20 columns (and one row of look-ahead) were read.
    assert consumed == 21
    assert sum(1 for _ in records) == 50 * 20 - 1


def test_progress_counts_tables_read_towards_the_tables_listed_database_by_database(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any
) -> None:
    _shop(catalog)
    other = catalog.database("other")
    other.add_table(9, "public", "only", [("id", "bigint")])
    assert connector.progress() == {}  # nothing before a crawl
    seen: list[dict[str, int]] = []
    records = []
    for record in connector.poll({}):
        records.append(record)
        seen.append(connector.progress())
    # The first database's 4 tables are the total until the crawl reaches the second (sorted: other, then shop).
    assert seen[0] == {"databases_total": 2, "databases_done": 0, "tables_read": 0, "tables_total": 0}
    assert {"tables_read": 1, "tables_total": 1}.items() <= seen[3].items()
    assert connector.progress() == {"databases_total": 2, "databases_done": 2, "tables_read": 5, "tables_total": 5}
    # Unchanged tables are read too: a rerun that emits nothing still ends at 5 of 5.
    assert list(connector.poll(apply({}, records))) == []
    assert connector.progress() == {"databases_total": 2, "databases_done": 2, "tables_read": 5, "tables_total": 5}


def test_the_table_count_lists_the_relation_kinds_the_table_query_lists() -> None:
    from connectors.postgres import catalog as module

    assert f"c.relkind IN {module.TABLE_RELKINDS}" in module._TABLES_SQL
    assert f"c.relkind IN {module.TABLE_RELKINDS}" in module._COUNT_TABLES_SQL
