"""A person's edits of an asset: their own state (``asset_edits``), versioned apart from the sources' upserts, and the
merge rule that lays them over the source's values (``catalog.projection.apply_edits``)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from catalog.projection import apply_edits
from processors.enrichment.parse import ParsedRow
from processors.enrichment.projection import spec_upsert
from processors.enrichment.rows import SPEC_BY_TYPE
from processors.enrichment.state import ASSET_EDITS, ASSETS, fold
from tests._support.parsedrows import valid_row

NOW = datetime(2026, 11, 26, tzinfo=UTC)
T = datetime(2026, 11, 25, tzinfo=UTC)
URN = "urn:metalake:postgres:prod/shop/public/orders"
EDITED = "io.metalake.asset.edited.v1"
CLEARED = "io.metalake.asset.edit.cleared.v1"
CRAWLED = {"description": "from the crawler", "owners": ["dba@example.com"], "properties": {"rows": "10", "tier": "2"}}


def _edit(version: int, event_id: str, aspect: str, **data: Any) -> ParsedRow:
    return valid_row(EDITED, version, event_id, {"urn": URN, "version": version, "aspect": aspect, **data}, T)


def _clear(version: int, event_id: str, aspect: str) -> ParsedRow:
    return valid_row(CLEARED, version, event_id, {"urn": URN, "version": version, "aspect": aspect}, T)


def _upsert(version: int, event_id: str, **data: Any) -> ParsedRow:
    return valid_row(
        "io.metalake.asset.upserted.v1",
        version,
        event_id,
        {"urn": URN, "version": version, "kind": "table", "name": "orders", **data},
        T,
    )


# -- the merge rule -------------------------------------------------------------------------------------------------


def test_without_edits_the_sources_values_show() -> None:
    assert apply_edits(CRAWLED, []) == {**CRAWLED, "edited": []}


def test_a_live_edit_wins_over_the_sources_value() -> None:
    edits = [
        {"aspect": "description", "text": "by a person", "deleted": False},
        {"aspect": "owners", "owners": ["alice@example.com"], "deleted": False},
    ]
    shown = apply_edits(CRAWLED, edits)
    assert shown["description"] == "by a person"
    assert shown["owners"] == ["alice@example.com"]
    assert shown["properties"] == CRAWLED["properties"]
    assert shown["edited"] == ["description", "owners"]


def test_a_property_edit_sets_that_property_only() -> None:
    shown = apply_edits(CRAWLED, [{"aspect": "properties.tier", "text": "1", "deleted": False}])
    assert shown["properties"] == {"rows": "10", "tier": "1"}
    shown = apply_edits({}, [{"aspect": "properties.domain", "text": "sales", "deleted": False}])
    assert shown["properties"] == {"domain": "sales"}
    assert shown["description"] is None and shown["owners"] is None


def test_an_empty_edit_is_still_an_edit() -> None:
    # A person may say "no description" or "no owners" over what a crawler says.
    shown = apply_edits(CRAWLED, [{"aspect": "description", "text": "", "deleted": False}])
    assert shown["description"] == ""
    assert apply_edits(CRAWLED, [{"aspect": "owners", "owners": [], "deleted": False}])["owners"] == []


def test_a_cleared_edit_shows_the_sources_value_again() -> None:
    edits = [
        {"aspect": "description", "text": "by a person", "deleted": True},
        {"aspect": "properties.tier", "text": "1", "deleted": True},
    ]
    assert apply_edits(CRAWLED, edits) == {**CRAWLED, "edited": []}


def test_the_asset_given_is_not_changed() -> None:
    held = {"properties": {"rows": "10"}}
    apply_edits(held, [{"aspect": "properties.tier", "text": "1", "deleted": False}])
    assert held == {"properties": {"rows": "10"}}


# -- the edits' state -----------------------------------------------------------------------------------------------


def test_edit_events_feed_their_own_table_not_the_assets() -> None:
    assert SPEC_BY_TYPE[EDITED] is ASSET_EDITS and SPEC_BY_TYPE[CLEARED] is ASSET_EDITS
    assert EDITED not in ASSETS.types and CLEARED not in ASSETS.types
    # A crawl folds into the asset's row only: it has nothing to say about the edits.
    assert fold(ASSET_EDITS, [_upsert(99, "e9", description="crawled")], NOW) == []


def test_one_row_per_aspect_the_newest_edit_wins() -> None:
    rows = fold(
        ASSET_EDITS,
        [
            _edit(2, "e2", "description", text="second", actor="alice"),
            _edit(1, "e1", "description", text="first", actor="bob"),
            _edit(1, "e3", "owners", owners=["alice@example.com"], actor="alice"),
        ],
        NOW,
    )
    by_aspect = {r["aspect"]: r for r in rows}
    assert set(by_aspect) == {"description", "owners"}
    assert by_aspect["description"]["text"] == "second" and by_aspect["description"]["version"] == 2
    assert by_aspect["owners"]["owners"] == ["alice@example.com"]


def test_clearing_is_a_tombstone_and_an_older_edit_replayed_after_it_changes_nothing() -> None:
    [row] = fold(ASSET_EDITS, [_edit(1, "e1", "description", text="x"), _clear(2, "e2", "description")], NOW)
    assert row["deleted"] is True and row["version"] == 2
    [late] = fold(ASSET_EDITS, [_edit(1, "e1", "description", text="x")], NOW)
    # The projection's guard: the tombstone (2, e2) is newer, so the replayed edit's upsert matches nothing.
    guard = spec_upsert(ASSET_EDITS)(late)["q"]["$or"]
    assert guard == [{"version": {"$lt": 1}}, {"version": 1, "event_id": {"$lt": "e1"}}]


def test_an_edit_after_a_clear_brings_a_new_value() -> None:
    [row] = fold(ASSET_EDITS, [_clear(2, "e2", "description"), _edit(3, "e3", "description", text="new")], NOW)
    assert row["deleted"] is False and row["text"] == "new"


def test_the_same_edit_twice_folds_to_the_same_row() -> None:
    edit = _edit(5, "e5", "properties.tier", text="1", actor="alice")
    assert fold(ASSET_EDITS, [edit], NOW) == fold(ASSET_EDITS, [edit, edit], NOW)


def test_the_projection_document_of_an_edit() -> None:
    [row] = fold(ASSET_EDITS, [_edit(5, "e5", "properties.tier", text="1", actor="alice")], NOW)
    op = spec_upsert(ASSET_EDITS)(row)
    assert op["q"]["_id"] == f"{URN}|properties.tier"
    assert op["u"]["$set"]["text"] == "1" and op["u"]["$set"]["actor"] == "alice"
    assert "$setOnInsert" not in op["u"]  # the assets' health defaults are theirs alone
