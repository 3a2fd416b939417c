"""What apply_upserts and apply_updates send, against a scripted server: no read first, every update statement alone,
duplicate keys counted as stale, any other write error raised."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, cast

import pytest
from pymongo.collection import Collection
from pymongo.errors import OperationFailure

from processors.enrichment.projection import (
    DUPLICATE_KEY,
    apply_updates,
    apply_upserts,
    first_per_id,
    guarded_upsert,
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


def test_new_documents_take_one_insert_and_no_read() -> None:
    collection, db = _collection(lambda cmd: {"n": len(cmd["documents"]), "ok": 1.0})
    ops = [guarded_upsert(f"u{i}", 3, "e", {"name": i}) for i in range(5)]
    ops[0]["u"]["$setOnInsert"] = {"health": "ok"}
    assert apply_upserts(collection, ops) == (5, 0)
    assert [next(iter(c)) for c in db.commands] == ["insert"]
    assert db.commands[0]["ordered"] is False
    assert db.commands[0]["documents"][0] == {
        "_id": "u0", "health": "ok", "name": 0, "version": 3, "event_id": "e"
    }  # fmt: skip


def test_held_documents_go_through_the_guard_one_statement_per_command() -> None:
    def reply(cmd: dict[str, Any]) -> Reply:
        if "insert" in cmd:  # u1, u2 and u4 are held
            return {"n": 2, "writeErrors": [_dup(1), _dup(2), _dup(4)], "ok": 1.0}
        if cmd["updates"][0]["q"]["_id"] == "u2":  # a newer u2 is held: the guard refuses
            return {"writeErrors": [_dup(0)], "ok": 1.0}
        return {"n": 1, "nModified": 1, "ok": 1.0}

    collection, db = _collection(reply)
    ops = [guarded_upsert(f"u{i}", 3, "e", {}) for i in range(5)]
    assert apply_upserts(collection, ops) == (4, 1)
    updates = [c for c in db.commands if "update" in c]
    assert [len(c["updates"]) for c in updates] == [1, 1, 1]
    assert [c["updates"][0]["q"]["_id"] for c in updates] == ["u1", "u2", "u4"]


def test_a_second_operation_on_an_id_follows_the_first_through_the_guard() -> None:
    collection, db = _collection(lambda cmd: {"n": len(cmd.get("documents", [None])), "ok": 1.0})
    ops = [guarded_upsert("a", 1, "e", {}), guarded_upsert("a", 2, "e", {})]
    assert apply_upserts(collection, ops) == (2, 0)
    assert [d["_id"] for d in db.commands[0]["documents"]] == ["a"]
    assert db.commands[1]["updates"][0]["u"]["$set"]["version"] == 2


def test_chunks_bound_the_documents_of_one_insert() -> None:
    collection, db = _collection(lambda cmd: {"n": len(cmd["documents"]), "ok": 1.0})
    assert apply_upserts(collection, [guarded_upsert(f"u{i}", 1, "e", {}) for i in range(7)], chunk=3) == (7, 0)
    assert [len(c["documents"]) for c in db.commands] == [3, 3, 1]


def test_any_other_write_error_is_raised() -> None:
    collection, _ = _collection(lambda cmd: {"n": 0, "writeErrors": [{"index": 0, "code": 2, "errmsg": "bad"}]})
    with pytest.raises(OperationFailure, match="MongoDB insert failed: bad"):
        apply_upserts(collection, [guarded_upsert("a", 1, "e", {})])


def test_updates_are_sent_alone_and_their_matches_summed() -> None:
    collection, db = _collection(lambda cmd: {"n": 1 if cmd["updates"][0]["q"]["_id"] != "b" else 0, "ok": 1.0})
    ops = [{"q": {"_id": i}, "u": {"$set": {"x": 1}}} for i in ("a", "b", "c")]
    assert apply_updates(collection, ops) == 2
    assert [len(c["updates"]) for c in db.commands] == [1, 1, 1]


def test_an_update_error_is_raised() -> None:
    collection, _ = _collection(lambda cmd: {"writeErrors": [{"index": 0, "code": 66, "errmsg": "immutable"}]})
    with pytest.raises(OperationFailure, match="MongoDB update failed: immutable"):
        apply_updates(collection, [{"q": {"_id": "a"}, "u": {"$set": {"_id": "b"}}}])
