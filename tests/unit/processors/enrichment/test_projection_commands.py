"""What apply_upserts and apply_updates send, against a scripted server: no read first, every update statement alone,
insert-first only after a chunk of mostly new documents, duplicate keys counted as stale, other write errors raised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from pymongo.collection import Collection
from pymongo.errors import OperationFailure

from processors.enrichment.projection import (
    DUPLICATE_KEY,
    _insert_new,
    _upsert_one,
    apply_updates,
    apply_upserts,
    first_per_id,
    guarded_upsert,
    insert_first_next,
)

Reply = dict[str, Any]


class ScriptedDatabase:
    """Records every command; answers with ``reply(command)``."""

    def __init__(self, reply: Callable[[dict[str, Any]], Reply]) -> None:
        self.commands: list[dict[str, Any]] = []
        self._reply = reply

    def command(self, command: dict[str, Any]) -> Reply:
        self.commands.append(command)
        return self._reply(command)


class ScriptedCollection:
    name = "assets"

    def __init__(self, database: ScriptedDatabase) -> None:
        self.database = database


def _collection(reply: Callable[[dict[str, Any]], Reply]) -> tuple[Collection[dict[str, Any]], ScriptedDatabase]:
    db = ScriptedDatabase(reply)
    return cast(Collection[dict[str, Any]], ScriptedCollection(db)), db


def _dup(index: int) -> dict[str, Any]:
    return {"index": index, "code": DUPLICATE_KEY, "errmsg": "E11000 duplicate key"}


def test_first_per_id_keeps_later_operations_on_the_same_id_apart_and_in_order() -> None:
    ops = [guarded_upsert(i, 1, "e", {}) for i in ("a", "b", "a", "c", "b", "a")]
    assert first_per_id(ops) == ([0, 1, 3], [2, 4, 5])


def _upserted(cmd: dict[str, Any]) -> Reply:
    """The reply to a guarded upsert that created its document, or to an insert with no duplicate."""
    if "documents" in cmd:
        return {"n": len(cmd["documents"]), "ok": 1.0}
    return {"n": 1, "nModified": 0, "upserted": [{"index": 0, "_id": cmd["updates"][0]["q"]["_id"]}], "ok": 1.0}


def _updated(cmd: dict[str, Any]) -> Reply:
    return {"n": 1, "nModified": 1, "ok": 1.0}


def _kinds(db: ScriptedDatabase) -> list[str]:
    return [next(iter(c)) for c in db.commands]


def test_the_next_chunk_inserts_first_from_half_new_documents_on() -> None:
    assert insert_first_next(25, 50)
    assert not insert_first_next(24, 50)
    assert not insert_first_next(0, 0)


def test_the_first_chunk_goes_through_the_guard_one_statement_per_command_and_no_read() -> None:
    collection, db = _collection(_updated)
    assert apply_upserts(collection, [guarded_upsert(f"u{i}", 3, "e", {}) for i in range(4)]) == (4, 0)
    assert _kinds(db) == ["update"] * 4
    assert [len(c["updates"]) for c in db.commands] == [1, 1, 1, 1]


def test_after_a_chunk_of_new_documents_the_next_is_inserted_first() -> None:
    collection, db = _collection(_upserted)
    ops = [guarded_upsert(f"u{i}", 3, "e", {"name": i}) for i in range(5)]
    ops[3]["u"]["$setOnInsert"] = {"health": "ok"}
    assert apply_upserts(collection, ops, chunk=3) == (5, 0)
    assert _kinds(db) == ["update", "update", "update", "insert"]
    insert = db.commands[-1]
    assert insert["ordered"] is False
    assert insert["documents"][0] == {"_id": "u3", "health": "ok", "name": 3, "version": 3, "event_id": "e"}


def test_after_a_chunk_of_held_documents_the_next_goes_through_the_guard_again() -> None:
    collection, db = _collection(_updated)
    apply_upserts(collection, [guarded_upsert(f"u{i}", 3, "e", {}) for i in range(6)], chunk=3)
    assert _kinds(db) == ["update"] * 6


def test_inserted_first_held_documents_go_through_the_guard_one_by_one() -> None:
    def reply(cmd: dict[str, Any]) -> Reply:
        if "insert" in cmd:  # u1, u2 and u4 are held
            return {"n": 2, "writeErrors": [_dup(1), _dup(2), _dup(4)], "ok": 1.0}
        if cmd["updates"][0]["q"]["_id"] == "u2":  # a newer u2 is held: the guard refuses
            return {"writeErrors": [_dup(0)], "ok": 1.0}
        return _updated(cmd)

    collection, db = _collection(reply)
    ops = [guarded_upsert(f"u{i}", 3, "e", {}) for i in range(5)]
    assert _insert_new(collection, ops) == (2, [ops[1], ops[2], ops[4]])
    assert _upsert_one(collection, ops[2]) == (False, False)
    assert _upsert_one(collection, ops[4]) == (True, False)
    assert [len(c["updates"]) for c in db.commands if "update" in c] == [1, 1]


def test_a_stale_upsert_is_counted_and_the_rest_go_on() -> None:
    def reply(cmd: dict[str, Any]) -> Reply:
        return {"writeErrors": [_dup(0)], "ok": 1.0} if cmd["updates"][0]["q"]["_id"] == "b" else _updated(cmd)

    collection, _ = _collection(reply)
    assert apply_upserts(collection, [guarded_upsert(i, 1, "e", {}) for i in ("a", "b", "c")]) == (2, 1)


def test_a_second_operation_on_an_id_is_not_inserted_with_the_first() -> None:
    collection, db = _collection(_upserted)
    ops = [guarded_upsert("a", 1, "e", {}), guarded_upsert("a", 2, "e", {})]
    assert _insert_new(collection, ops) == (1, [ops[1]])
    assert [d["_id"] for d in db.commands[0]["documents"]] == ["a"]


def test_chunks_bound_the_documents_of_one_insert() -> None:
    collection, db = _collection(_upserted)
    assert apply_upserts(collection, [guarded_upsert(f"u{i}", 1, "e", {}) for i in range(8)], chunk=3) == (8, 0)
    assert [len(c.get("documents", c.get("updates"))) for c in db.commands] == [1, 1, 1, 3, 2]


def test_any_other_write_error_is_raised() -> None:
    collection, _ = _collection(lambda cmd: {"n": 0, "writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}]})
    with pytest.raises(OperationFailure, match="MongoDB update failed: bad"):
        apply_upserts(collection, [guarded_upsert("a", 1, "e", {})])
    with pytest.raises(OperationFailure, match="MongoDB insert failed: bad"):
        _insert_new(collection, [guarded_upsert("a", 1, "e", {})])


def test_updates_are_sent_alone_and_their_matches_summed() -> None:
    collection, db = _collection(lambda cmd: {"n": 1 if cmd["updates"][0]["q"]["_id"] != "b" else 0, "ok": 1.0})
    ops = [{"q": {"_id": i}, "u": {"$set": {"x": 1}}} for i in ("a", "b", "c")]
    assert apply_updates(collection, ops) == 2
    assert [len(c["updates"]) for c in db.commands] == [1, 1, 1]


def test_an_update_error_is_raised() -> None:
    collection, _ = _collection(lambda cmd: {"writeErrors": [{"index": 0, "code": 66, "errmsg": "immutable"}]})
    with pytest.raises(OperationFailure, match="MongoDB update failed: immutable"):
        apply_updates(collection, [{"q": {"_id": "a"}, "u": {"$set": {"_id": "b"}}}])
