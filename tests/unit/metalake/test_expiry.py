"""The shared expiry mechanism: the TTL index where the server has one, batched deletes, the janitor's names.

The janitor's timing is tested through the ledger's (tests/unit/processors/outbound/test_ledger_expiry.py)."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any, cast

import pytest
from pymongo.errors import OperationFailure
from pymongo.results import DeleteResult

from metalake.expiry import EXPIRY_INDEX, ExpiryJanitor, delete_in_batches, ensure_ttl_index


class _Indexes:
    def __init__(self, code: int | None = None) -> None:
        self.code = code
        self.created: list[tuple[Any, dict[str, Any]]] = []

    def create_index(self, keys: Any, **options: Any) -> str:
        if self.code is not None:
            raise OperationFailure("no", code=self.code)
        self.created.append((keys, options))
        return str(options["name"])


def test_the_ttl_index_expires_each_document_at_its_own_expires_at() -> None:
    collection = _Indexes()
    assert ensure_ttl_index(cast(Any, collection))
    assert collection.created == [("expires_at", {"name": EXPIRY_INDEX, "expireAfterSeconds": 0})]


def test_a_server_without_ttl_indexes_answers_false_and_other_failures_raise() -> None:
    assert not ensure_ttl_index(cast(Any, _Indexes(code=238)))  # FerretDB 1.x: NotImplemented
    with pytest.raises(OperationFailure):
        ensure_ttl_index(cast(Any, _Indexes(code=13)))  # Unauthorized: not ours to hide


class _Docs:
    """Matches every document; records the size of each find and delete."""

    def __init__(self, count: int) -> None:
        self.ids = list(range(count))
        self.finds: list[int] = []

    def find(self, query: dict[str, Any], projection: dict[str, int], limit: int) -> list[dict[str, Any]]:
        found = [{"_id": i} for i in self.ids[:limit]]
        self.finds.append(len(found))
        return found

    def delete_many(self, query: dict[str, Any]) -> DeleteResult:
        assert query["expires_at"] == {"$lte": 1}  # the query is applied again to the batch
        wanted = set(query["_id"]["$in"])
        before = len(self.ids)
        self.ids = [i for i in self.ids if i not in wanted]
        return DeleteResult({"n": before - len(self.ids)}, acknowledged=True)


def test_deletes_go_in_batches_until_nothing_matches() -> None:
    docs = _Docs(1_200)
    assert delete_in_batches(cast(Any, docs), {"expires_at": {"$lte": 1}}, batch=500) == 1_200
    assert docs.finds == [500, 500, 200] and docs.ids == []
    assert delete_in_batches(cast(Any, docs), {"expires_at": {"$lte": 1}}, batch=500) == 0


class _Store:
    retention = timedelta(hours=1)

    def ensure_expiry(self) -> bool:
        return False

    def prune(self) -> int:
        return 2


def test_the_janitor_names_its_thread_and_log_events_after_its_store(caplog: pytest.LogCaptureFixture) -> None:
    janitor = ExpiryJanitor(_Store(), 60.0, name="connect.webhook_deliveries", clock=lambda: 0.0)
    assert janitor.thread_name == "connect-webhook-deliveries-prune"
    with caplog.at_level(logging.INFO, logger="metalake.expiry"):
        janitor.start(background=False)
        assert janitor.tick() == 2
    assert [r.getMessage() for r in caplog.records] == [
        "connect.webhook_deliveries_expiry",
        "connect.webhook_deliveries_pruned",
    ]
    assert caplog.records[0].retention_s == 3600.0
