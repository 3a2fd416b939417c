"""The catalog's keyset condition: documents strictly after a sort key, in the order of the sort fields."""

from __future__ import annotations

from api.services.catalog import after


def test_after_is_a_strict_keyset_condition() -> None:
    assert after(["_id"], ["b"]) == {"_id": {"$gt": "b"}}
    assert after(["name", "_id"], ["n", "u"]) == {"$or": [{"name": {"$gt": "n"}}, {"name": "n", "_id": {"$gt": "u"}}]}
