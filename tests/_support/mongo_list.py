"""A few pymongo calls over lists (find with ``$ne``/``$regex``/``$in``/``$exists``/equality, insert, count,
delete_one, update_one and the ``update`` command with ``$set``): enough for the engine store, the tag loaders of
api/services/enforcement.py and api/services/tag_lookup.py, and the backfill of catalog/urn_keys.py. Every ``find``
filter is kept in ``queries`` and every ``update`` command in ``commands``, for tests that count round trips."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any


class _Cursor(list[dict[str, Any]]):
    """A ``find`` answer: a list that also sorts (one key) and limits as a pymongo cursor."""

    def sort(self, key: Any = None, direction: int = 1, **_: Any) -> _Cursor:  # type: ignore[override]
        return _Cursor(sorted(self, key=lambda d: str(d.get(key)), reverse=direction < 0))

    def limit(self, n: int) -> _Cursor:
        return _Cursor(self[:n])


class FakeCollection:
    """The few pymongo calls the store and the tag loader make, over a list (no Mongo fake is installed here)."""

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []
        self.queries: list[dict[str, Any]] = []

    @staticmethod
    def _equal(value: Any, wanted: Any) -> bool:
        # As MongoDB: a scalar matches an array field that holds it.
        return value == wanted or (isinstance(value, list) and not isinstance(wanted, list) and wanted in value)

    @classmethod
    def _match(cls, doc: dict[str, Any], query: dict[str, Any]) -> bool:
        for name, cond in query.items():
            value = doc.get(name)
            if isinstance(cond, dict) and "$ne" in cond:
                if value == cond["$ne"]:
                    return False
            elif isinstance(cond, dict) and "$regex" in cond:
                flags = re.IGNORECASE if "i" in cond.get("$options", "") else 0
                if not isinstance(value, str) or not re.search(cond["$regex"], value, flags):
                    return False
            elif isinstance(cond, dict) and "$in" in cond:
                if not any(cls._equal(value, wanted) for wanted in cond["$in"]):
                    return False
            elif isinstance(cond, dict) and "$exists" in cond:
                if (name in doc) != bool(cond["$exists"]):
                    return False
            elif not cls._equal(value, cond):
                return False
        return True

    def insert_one(self, doc: dict[str, Any]) -> None:
        self.docs.append(dict(doc))

    def insert_many(self, docs: list[dict[str, Any]]) -> None:
        self.docs += [dict(d) for d in docs]

    def find(self, query: dict[str, Any] | None = None, projection: Any = None, **_: Any) -> _Cursor:
        query = query or {}
        self.queries.append(query)
        return _Cursor(dict(d) for d in self.docs if self._match(d, query))

    def find_one(self, query: dict[str, Any]) -> dict[str, Any] | None:
        found = self.find(query)
        return found[0] if found else None

    def update_one(self, query: dict[str, Any], update: dict[str, Any], upsert: bool = False) -> Any:
        """``$set`` on the first match; with ``upsert``, a new document from the filter's equalities when none."""
        doc = next((d for d in self.docs if self._match(d, query)), None)
        if doc is None and upsert:
            doc = {k: v for k, v in query.items() if not isinstance(v, dict)}
            self.docs.append(doc)
        changed = doc is not None and any(doc.get(k) != v for k, v in update["$set"].items())
        if doc is not None:
            doc.update(update["$set"])
        return SimpleNamespace(matched_count=int(doc is not None), modified_count=int(changed))

    def count_documents(self, query: dict[str, Any]) -> int:
        return len(self.find(query))

    def delete_one(self, query: dict[str, Any]) -> Any:
        found = self.find_one(query)
        if found is not None:
            self.docs = [d for d in self.docs if d["_id"] != found["_id"]]
        return SimpleNamespace(deleted_count=int(found is not None))


class FakeDatabase(dict[str, FakeCollection]):
    name = "fake"

    def __init__(self) -> None:
        super().__init__()
        self.commands: list[dict[str, Any]] = []
        # What ``buildInfo`` answers: MongoDB's shape; a test of FerretDB adds ``ferretdbVersion``.
        self.build_info: dict[str, Any] = {"version": "7.0.0"}
        self.client = SimpleNamespace(admin=SimpleNamespace(command=lambda name: dict(self.build_info)))

    def __missing__(self, name: str) -> FakeCollection:
        self[name] = FakeCollection()
        return self[name]

    def command(self, command: dict[str, Any]) -> dict[str, Any]:
        """The ``update`` command, one statement at a time (as the projection and the backfill send it)."""
        self.commands.append(command)
        n = modified = 0
        for statement in command["updates"]:
            result = self[command["update"]].update_one(statement["q"], statement["u"])
            n, modified = n + result.matched_count, modified + result.modified_count
        return {"ok": 1, "n": n, "nModified": modified}

    def get_collection(self, name: str, **_: Any) -> FakeCollection:
        return self[name]
