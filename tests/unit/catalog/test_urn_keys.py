"""The normalised URNs the tag documents carry (catalog/urn_keys.py), and the backfill of documents written before
the field existed: once, in batches, idempotent, then the marker readers trust."""

from __future__ import annotations

from typing import Any

from catalog import urn_keys
from metalake.urn import asset_urn
from tests._support.mongo_list import FakeDatabase

TABLE = asset_urn("postgres", "Shop-Prod", "Shop", "Public", "People")
COLUMN = f"{TABLE}/E%C3%89mail"  # "EÉmail": a non-ASCII capital, percent-encoded as stored


def test_keys_are_the_asset_and_its_parent_lower_cased_segment_by_segment() -> None:
    table = "urn:metalake:postgres:shop-prod/shop/public/people"
    assert urn_keys.normalised(TABLE) == table
    # Lower-cased before encoding: "É" is %C3%89 and "é" %C3%A9, which lower-casing the encoded text would miss.
    assert urn_keys.urn_keys(COLUMN) == [f"{table}/e%C3%A9mail", table]
    assert urn_keys.urn_keys(asset_urn("postgres", "Shop-Prod", "Shop")) == ["urn:metalake:postgres:shop-prod/shop"]
    assert urn_keys.urn_keys("not-a-URN/X") == ["not-a-urn/x"]


def _docs(db: Any) -> None:
    db["classifications"].insert_many(
        [
            {"_id": f"{COLUMN}|PII", "urn": COLUMN, "tag": "PII"},
            {"_id": f"{TABLE}|GDPR", "urn": TABLE, "tag": "GDPR", "urn_keys": ["stale"]},
            {"_id": "written-since|PII", "urn": TABLE, "tag": "PII", "urn_keys": urn_keys.urn_keys(TABLE)},
        ]
    )
    db["propagated_tags"].insert_many(
        [{"_id": f"{COLUMN}|PII|o{i}", "urn": COLUMN, "tag": "PII", "origin": f"o{i}"} for i in range(5)]
    )


def test_the_backfill_sets_the_field_once_in_batches_then_records_the_marker() -> None:
    db: Any = FakeDatabase()
    _docs(db)
    assert not urn_keys.ready(db)
    assert urn_keys.backfill(db, batch=2) == 7  # the stale one is corrected, the current one left alone
    for name in urn_keys.COLLECTIONS:
        for doc in db[name].docs:
            assert doc["urn_keys"] == urn_keys.urn_keys(doc["urn"])
    assert urn_keys.ready(db)
    # One statement per command (FerretDB holds a connection per matched statement until its command ends).
    assert len(db.commands) == 7 and all(len(c["updates"]) == 1 for c in db.commands)
    # Each statement names the URN it derived the keys from: a document is never given another URN's keys.
    assert all(c["updates"][0]["q"]["urn"] in (TABLE, COLUMN) for c in db.commands)


def test_the_backfill_is_idempotent() -> None:
    db: Any = FakeDatabase()
    _docs(db)
    urn_keys.backfill(db)
    sent = len(db.commands)
    assert urn_keys.backfill(db) == 0
    assert len(db.commands) == sent
    # Even without the marker (lost, or a concurrent run), nothing already right is written again.
    db["migrations"].docs.clear()
    assert urn_keys.backfill(db) == 0 and len(db.commands) == sent and urn_keys.ready(db)
