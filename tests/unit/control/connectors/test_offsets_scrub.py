"""Issue 12, item 11: the crawler's offsets in the compacted topic hold table, column and upstream URNs, so an erased
URN survived there and ``GET .../connectors/{name}/offsets`` served it. ``scrub`` decides, per record, what an erase
writes: the record without the URN, or a tombstone."""

from __future__ import annotations

from typing import Any

from control.connectors.offsets import scrub, topic_config, urn_matcher
from ops.settings import Settings

TABLE = "urn:metalake:postgres:prod/shop/public/jane%20doe%27s%20orders"
ODD_TABLE = "urn:metalake:postgres:prod/shop/public/jane doe's orders"
OTHER = "urn:metalake:postgres:prod/shop/public/orders"
SCHEMA = "urn:metalake:postgres:prod/shop/public"


def _table(urn: str, columns: list[str], upstreams: list[str]) -> dict[str, Any]:
    return {"urn": urn, "hash": "h", "version": 3, "columns": columns, "upstreams": upstreams}


def test_the_assets_own_offset_is_tombstoned_in_any_spelling() -> None:
    for urn in (TABLE, ODD_TABLE):
        assert scrub('{"table":"x"}', _table(urn, ["id"], []), urn_matcher(TABLE, False)) == (True, None)


def test_a_column_or_an_upstream_leaves_the_offset_that_names_it() -> None:
    offset = _table(OTHER, ["id", "jane's email"], [TABLE, SCHEMA + "/customers"])
    changed, upstream_gone = scrub('{"table":"orders"}', offset, urn_matcher(TABLE, False))
    assert changed and upstream_gone == _table(OTHER, ["id", "jane's email"], [SCHEMA + "/customers"])
    column = OTHER + "/jane%27s%20email"
    changed, column_gone = scrub('{"table":"orders"}', offset, urn_matcher(column, False))
    assert changed and column_gone == _table(OTHER, ["id"], [TABLE, SCHEMA + "/customers"])
    assert offset["columns"] == ["id", "jane's email"]  # the stored offset is not modified in place


def test_children_go_with_their_parent_and_others_stay_unchanged() -> None:
    offset = _table(OTHER, ["id"], [TABLE])
    assert scrub('{"table":"orders"}', offset, urn_matcher(SCHEMA, True)) == (True, None)
    assert scrub('{"table":"orders"}', offset, urn_matcher(SCHEMA, False)) == (False, offset)
    lookalike = urn_matcher(TABLE + "_archive", True)
    assert scrub('{"table":"orders"}', offset, lookalike) == (False, offset)


def test_a_urn_anywhere_else_tombstones_the_record() -> None:
    assert scrub("p", {"cursor": {"last": TABLE}}, urn_matcher(TABLE, False)) == (True, None)
    assert scrub(f'{{"asset":"{TABLE}"}}', {"n": 1}, urn_matcher(TABLE, False)) == (True, None)


def test_the_topic_bounds_how_long_a_superseded_record_stays() -> None:
    config = topic_config(Settings().connect)
    assert config == {
        "cleanup.policy": "compact",
        "segment.ms": "3600000",
        "max.compaction.lag.ms": "3600000",
        "delete.retention.ms": "3600000",
    }
