"""The version-guarded MongoDB upserts against the real FerretDB: stale, duplicate and racing writes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.collection import Collection

from processors.enrichment.projection import _insert_new, apply_upserts, guarded_upsert

pytestmark = pytest.mark.integration


@pytest.fixture
def collection(mongo: MongoClient[dict[str, Any]]) -> Iterator[Collection[dict[str, Any]]]:
    name = f"it_projection_{secrets.token_hex(4)}"
    yield mongo[name]["assets"]
    mongo.drop_database(name)


def test_a_stale_write_in_the_middle_does_not_stop_the_others(collection: Collection[dict[str, Any]]) -> None:
    collection.insert_one({"_id": "b", "version": 5, "event_id": "e5", "name": "newest"})
    ops = [
        guarded_upsert("a", 1, "e1", {"name": "a1"}),
        guarded_upsert("b", 3, "e3", {"name": "older"}),  # stale
        guarded_upsert("c", 1, "e1", {"name": "c1"}),
    ]
    assert apply_upserts(collection, ops) == (2, 1)
    assert {d["_id"]: d["name"] for d in collection.find()} == {"a": "a1", "b": "newest", "c": "c1"}


def test_replaying_the_same_batch_changes_nothing(collection: Collection[dict[str, Any]]) -> None:
    ops = [guarded_upsert(f"u{i}", 7, "e", {"name": f"n{i}"}) for i in range(50)]
    assert apply_upserts(collection, ops) == (50, 0)
    before = sorted(collection.find(), key=lambda d: d["_id"])
    assert apply_upserts(collection, ops) == (0, 50)
    assert sorted(collection.find(), key=lambda d: d["_id"]) == before


def test_a_tie_in_version_goes_to_the_greater_event_id(collection: Collection[dict[str, Any]]) -> None:
    assert apply_upserts(collection, [guarded_upsert("x", 1, "b", {"name": "b"})]) == (1, 0)
    assert apply_upserts(collection, [guarded_upsert("x", 1, "a", {"name": "a"})]) == (0, 1)
    assert apply_upserts(collection, [guarded_upsert("x", 1, "c", {"name": "c"})]) == (1, 0)
    assert collection.find_one({"_id": "x"})["name"] == "c"  # type: ignore[index]


def test_a_race_lost_after_the_read_is_skipped_not_fatal(collection: Collection[dict[str, Any]]) -> None:
    # Simulate a concurrent writer that lands between our read of held versions and our update: the guard in the
    # update filter still refuses the stale write, and the rest of the batch goes on.
    ops = [guarded_upsert("r", 2, "e", {"name": "mine"}), guarded_upsert("s", 1, "e", {"name": "s"})]
    original_find = collection.find

    def find_then_race(*args: Any, **kwargs: Any) -> Any:
        result = list(original_find(*args, **kwargs))
        collection.insert_one({"_id": "r", "version": 9, "event_id": "z", "name": "theirs"})
        return result

    collection.find = find_then_race  # type: ignore[method-assign]
    assert apply_upserts(collection, ops) == (1, 1)
    assert {d["_id"]: d["name"] for d in original_find()} == {"r": "theirs", "s": "s"}


def test_hundreds_of_updates_to_existing_documents_answer(mongo: MongoClient[dict[str, Any]], settings: Any) -> None:
    # FerretDB never answers an update command in which 100+ statements match existing documents: the projection
    # must chunk below that, or a batch that touches many known assets stalls the job (a socket timeout shows it).
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, socketTimeoutMS=30_000)
    name = f"it_projection_{secrets.token_hex(4)}"
    try:
        collection = client[name]["assets"]
        assert apply_upserts(collection, [guarded_upsert(f"u{i}", 1, "e", {"n": 1}) for i in range(300)]) == (300, 0)
        assert apply_upserts(collection, [guarded_upsert(f"u{i}", 2, "e", {"n": 2}) for i in range(300)]) == (300, 0)
        assert collection.count_documents({"n": 2}) == 300
    finally:
        client.drop_database(name)
        client.close()


def test_a_document_created_since_the_read_goes_through_the_guard(collection: Collection[dict[str, Any]]) -> None:
    # Between apply_upserts' read and its insert, another writer may create the document: the insert's duplicate key
    # hands that upsert back, and the version guard then decides (here: the other writer's newer version stays).
    collection.insert_one({"_id": "b", "version": 5, "event_id": "e5", "name": "newest"})
    ops = [guarded_upsert(i, 1, "e1", {"name": f"{i}1"}) for i in ("a", "b", "c")]
    inserted, raced = _insert_new(collection, ops)
    assert (inserted, [op["q"]["_id"] for op in raced]) == (2, ["b"])
    assert apply_upserts(collection, raced) == (0, 1)
    assert {d["_id"]: d["name"] for d in collection.find()} == {"a": "a1", "b": "newest", "c": "c1"}
