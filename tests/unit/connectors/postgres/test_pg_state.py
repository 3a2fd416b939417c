"""Fingerprints, versions and the bookkeeping of stored partitions."""

from __future__ import annotations

import pytest

from connectors.postgres.catalog import TableRow
from connectors.postgres.state import crawl_version, group_by_database, removed, stale, table_hash
from control.connectors.plugin import partition_key

URN = "urn:metalake:postgres:prod/shop/public/orders"
ROW = TableRow(7, "public", "orders", "r", "orders", "alice", 100, False, 3, "ab" * 32, [("fk", "public", "c")])


def test_table_hash_ignores_row_estimates_but_not_definitions() -> None:
    base = table_hash(URN, ROW)
    assert table_hash(URN, ROW._replace(estimated_rows=5_000_000, oid=8)) == base
    for change in (
        {"comment": "Orders"},
        {"comment": None},
        {"relkind": "p"},
        {"owner": "bob"},
        {"column_count": 4},
        {"columns_digest": "cd" * 32},
        {"foreign_keys": []},
        {"foreign_keys": [("fk", "public", "d")]},
    ):
        assert table_hash(URN, ROW._replace(**change)) != base, change
    assert table_hash(URN.replace("prod", "staging"), ROW) != base


def test_fingerprint_parts_cannot_bleed_into_each_other() -> None:
    # JSON encoding keeps part boundaries: ("ab", "c") and ("a", "bc") differ.
    assert table_hash(URN, ROW._replace(comment="a", owner="bc")) != table_hash(
        URN, ROW._replace(comment="ab", owner="c")
    )


def test_crawl_version_is_now_unless_a_stored_version_is_ahead() -> None:
    assert crawl_version({}, 1000) == 1000
    assert crawl_version({"a": {"version": 999}}, 1000) == 1000
    assert crawl_version({"a": {"version": 1000}, "b": {"version": 5}}, 1000) == 1001
    assert crawl_version({"a": {"version": 4000}, "b": {}}, 1000) == 4001


def test_removed_keeps_recorded_order() -> None:
    assert removed({"columns": ["c", "a", "b"]}, "columns", ["a"]) == ["c", "b"]
    assert removed(None, "columns", []) == []
    assert removed({}, "upstreams", []) == []


def _key(*path: str) -> str:
    return partition_key(dict(zip(("database", "schema", "table"), path, strict=False)))


def test_group_by_database_orders_tables_before_schemas_before_the_database() -> None:
    offsets = {
        _key("shop"): {"urn": "urn:metalake:postgres:prod/shop"},
        _key("shop", "public"): {"urn": "urn:metalake:postgres:prod/shop/public"},
        _key("shop", "public", "t"): {"urn": "urn:metalake:postgres:prod/shop/public/t", "columns": ["a b"]},
        _key("crm"): {"urn": "urn:metalake:postgres:prod/crm"},
    }
    grouped = group_by_database(offsets)
    assert sorted(grouped) == ["crm", "shop"]
    assert [len(p.urn.path) for p in grouped["shop"]] == [3, 2, 1]
    table = grouped["shop"][0]
    assert table.partition == {"database": "shop", "schema": "public", "table": "t"}
    assert table.column_urns() == ["urn:metalake:postgres:prod/shop/public/t/a%20b"]
    assert stale(grouped["shop"], {_key("shop"), _key("shop", "public")}) == [table]


@pytest.mark.parametrize(
    "offset",
    [{}, {"urn": "not-a-urn"}, {"urn": "urn:metalake:postgres:prod/other/public/t"}],
    ids=["no-urn", "bad-urn", "urn-of-another-partition"],
)
def test_offsets_not_written_by_the_crawler_are_ignored(offset: dict[str, str]) -> None:
    assert group_by_database({_key("shop", "public", "t"): offset}) == {}
