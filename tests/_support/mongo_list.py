"""A few pymongo calls over lists (find with ``$ne``/``$regex``/equality, insert, count, delete_one): enough for the
engine store and the tag loader of api/services/enforcement.py."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any


class FakeCollection:
    """The few pymongo calls the store and the tag loader make, over a list (no Mongo fake is installed here)."""

    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []

    @staticmethod
    def _match(doc: dict[str, Any], query: dict[str, Any]) -> bool:
        for name, cond in query.items():
            value = doc.get(name)
            if isinstance(cond, dict) and "$ne" in cond:
                if value == cond["$ne"]:
                    return False
            elif isinstance(cond, dict) and "$regex" in cond:
                flags = re.IGNORECASE if "i" in cond.get("$options", "") else 0
                if not isinstance(value, str) or not re.search(cond["$regex"], value, flags):
                    return False
            elif value != cond:
                return False
        return True

    def insert_one(self, doc: dict[str, Any]) -> None:
        self.docs.append(dict(doc))

    def insert_many(self, docs: list[dict[str, Any]]) -> None:
        self.docs += [dict(d) for d in docs]

    def find(self, query: dict[str, Any], projection: Any = None) -> list[dict[str, Any]]:
        return [dict(d) for d in self.docs if self._match(d, query)]

    def find_one(self, query: dict[str, Any]) -> dict[str, Any] | None:
        found = self.find(query)
        return found[0] if found else None

    def count_documents(self, query: dict[str, Any]) -> int:
        return len(self.find(query))

    def delete_one(self, query: dict[str, Any]) -> Any:
        found = self.find_one(query)
        if found is not None:
            self.docs = [d for d in self.docs if d["_id"] != found["_id"]]
        return SimpleNamespace(deleted_count=int(found is not None))


class FakeDatabase(dict[str, FakeCollection]):
    def __missing__(self, name: str) -> FakeCollection:
        self[name] = FakeCollection()
        return self[name]

    def get_collection(self, name: str, **_: Any) -> FakeCollection:
        return self[name]
