"""The version-guarded MongoDB upserts against the real FerretDB: stale, duplicate and racing writes."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.collection import Collection

from catalog.projection import unescape_keys
from processors.enrichment.projection import _insert_new, apply_updates, apply_upserts, guarded_upsert, spec_upsert
from processors.enrichment.state import ASSETS

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


def test_a_race_lost_after_the_insert_is_skipped_not_fatal(collection: Collection[dict[str, Any]]) -> None:
    # A concurrent writer lands between an insert-first chunk's insert (which found "r" held at an older version) and
    # the guarded update: the guard in the update filter still refuses the stale write, and the rest goes on.
    collection.insert_one({"_id": "r", "version": 1, "event_id": "a", "name": "old"})
    # Chunks of one: "q" is new, so the next chunk ("r") is inserted first.
    ops = [guarded_upsert(i, 2, "e", {"name": "mine"}) for i in ("q", "r", "s")]
    database = collection.database
    original = database.command

    def insert_then_race(command: Any, *args: Any, **kwargs: Any) -> Any:
        reply = original(command, *args, **kwargs)
        if isinstance(command, dict) and "insert" in command:
            collection.replace_one({"_id": "r"}, {"version": 9, "event_id": "z", "name": "theirs"})
        return reply

    database.command = insert_then_race  # type: ignore[method-assign]
    try:
        assert apply_upserts(collection, ops, chunk=1) == (2, 1)
    finally:
        del database.command
    assert {d["_id"]: d["name"] for d in collection.find()} == {"q": "mine", "r": "theirs", "s": "mine"}


def test_stale_writes_among_held_documents_are_counted_one_by_one(collection: Collection[dict[str, Any]]) -> None:
    # FerretDB reports a failed statement of a multi-statement update as index 0 with no count; statements sent
    # alone make each stale write count exactly once, wherever it sits in the batch.
    collection.insert_many([{"_id": f"h{i}", "version": 5, "event_id": "e", "name": "held"} for i in range(8)])
    ops = [guarded_upsert(f"h{i}", 4 if i in (3, 6) else 6, "e", {"name": "new"}) for i in range(8)]
    assert apply_upserts(collection, ops) == (6, 2)
    assert {d["_id"] for d in collection.find({"name": "held"})} == {"h3", "h6"}


@pytest.mark.parametrize("chunk", [50, 2])  # all through the guard; the second chunk inserted first
def test_repeated_ids_in_one_batch_end_at_the_newest(collection: Collection[dict[str, Any]], chunk: int) -> None:
    ops = [guarded_upsert(i, 1, "e", {"name": f"{i}1"}) for i in ("x", "y")]
    ops += [guarded_upsert("a", v, "e", {"name": f"a{v}"}) for v in (2, 1, 3)]
    assert apply_upserts(collection, ops, chunk=chunk) == (4, 1)
    assert collection.find_one({"_id": "a"})["name"] == "a3"  # type: ignore[index]


def test_a_large_batch_of_new_documents_then_its_replay(collection: Collection[dict[str, Any]]) -> None:
    ops = [guarded_upsert(f"n{i}", 1, "e", {"name": f"n{i}"}) for i in range(180)]
    assert apply_upserts(collection, ops) == (180, 0)  # after the first chunk, inserted first
    mixed = [guarded_upsert(f"n{i}", 2 if i % 3 else 1, "e", {"name": "again"}) for i in range(0, 180, 2)]
    mixed += [guarded_upsert(f"m{i}", 1, "e", {"name": "m"}) for i in range(90)]
    assert apply_upserts(collection, mixed) == (150, 30)
    assert collection.count_documents({"name": "again"}) == 60
    assert collection.count_documents({}) == 270


def test_hundreds_of_updates_to_existing_documents_answer(mongo: MongoClient[dict[str, Any]], settings: Any) -> None:
    # FerretDB never answers an update command in which 50 (PostgreSQL; 100 on SQLite) statements match existing
    # documents, and stays wedged: the projection sends statements alone, or a batch that touches many known assets
    # stalls the job (a socket timeout shows it).
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


def test_a_held_document_goes_through_the_guard(collection: Collection[dict[str, Any]]) -> None:
    # The insert's duplicate key hands a held document's upsert back, and the version guard then decides (here: the
    # held newer version stays).
    collection.insert_one({"_id": "b", "version": 5, "event_id": "e5", "name": "newest"})
    ops = [guarded_upsert(i, 1, "e1", {"name": f"{i}1"}) for i in ("a", "b", "c")]
    inserted, raced = _insert_new(collection, ops)
    assert (inserted, [op["q"]["_id"] for op in raced]) == (2, ["b"])
    assert apply_upserts(collection, raced) == (0, 1)
    assert {d["_id"]: d["name"] for d in collection.find()} == {"a": "a1", "b": "newest", "c": "c1"}


def test_concurrent_writers_of_held_documents_all_answer(mongo: MongoClient[dict[str, Any]], settings: Any) -> None:
    # Each statement holds a FerretDB backend connection until its command ends; writers in parallel must not add up
    # to the pool (50 on PostgreSQL), or FerretDB wedges for every client.
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, socketTimeoutMS=30_000)
    name = f"it_projection_{secrets.token_hex(4)}"
    try:
        collection = client[name]["assets"]
        collection.insert_many([{"_id": f"u{i}", "version": 1, "event_id": "e"} for i in range(240)])

        def write(part: int) -> int:
            ops = [{"q": {"_id": f"u{i}"}, "u": {"$set": {"n": part}}} for i in range(part * 60, part * 60 + 60)]
            return apply_updates(collection, ops)

        with ThreadPoolExecutor(max_workers=4) as pool:
            assert sum(pool.map(write, range(4))) == 240
    finally:
        client.drop_database(name)
        client.close()


def test_property_names_with_dots_and_dollars_are_stored_and_read_back(
    collection: Collection[dict[str, Any]],
) -> None:
    # FerretDB refuses "." in a field name and a leading "$": an asset whose source names its properties that way
    # (Spark conf, OpenLineage facets) once stopped the job's projection query for every tenant.
    properties = {"spark.app.name": "etl", "$ref": "x", "100%": "y", "a.b%2Ec": "z", "plain": "p"}
    row: dict[str, Any] = dict.fromkeys(ASSETS.columns)
    row.update(urn="urn:x", kind="table", name="t", properties=properties, deleted=False, version=1, event_id="e1")
    row.update(event_time=None, updated_at=datetime.now(UTC))
    assert apply_upserts(collection, [spec_upsert(ASSETS)(row)]) == (1, 0)
    stored = collection.find_one({"_id": "urn:x"})
    assert stored is not None and "spark.app.name" not in stored["properties"]
    assert unescape_keys(stored["properties"]) == properties
