"""A captured Monte Carlo delivery resent long after it was handled (issue 21, item 18). Monte Carlo signs no
timestamp, so its age cannot be checked: with the delivery log's records gone after 7 days, an "opened" resent then
was published again, with a newer version than the resolution, and reopened the incident. The records (a hash and a
few fields) are now kept 400 days by default."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from connectors.montecarlo import MonteCarloConnector
from connectors.runtime.dedup import COLLECTION, DeliveryLog
from control.connectors.plugin import InboundRequest
from control.connectors.settings import ConnectSettings

Request = Callable[..., InboundRequest]
Body = Callable[[str], bytes]


def _matches(doc: dict[str, Any], query: dict[str, Any]) -> bool:
    """The few query shapes the delivery log uses: ``$or``, ``$in``, ``$lte``, ``$exists`` and equality."""
    for key, want in query.items():
        if key == "$or":
            if not any(_matches(doc, q) for q in want):
                return False
        elif isinstance(want, dict):
            value = doc.get(key)
            for op, arg in want.items():
                ok = {
                    "$in": lambda v, a: v in a,
                    "$lte": lambda v, a: v is not None and v <= a,
                    "$exists": lambda v, a, k=key: (k in doc) == a,
                }[op](value, arg)
                if not ok:
                    return False
        elif doc.get(key) != want:
            return False
    return True


class _Deleted:
    def __init__(self, count: int) -> None:
        self.deleted_count = count


class _Collection:
    """An in-memory ``webhook_deliveries``: what :class:`DeliveryLog` calls, nothing more."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}

    def insert_one(self, doc: dict[str, Any]) -> None:
        self.docs[doc["_id"]] = dict(doc)

    def find_one(self, query: dict[str, Any], projection: Any = None) -> dict[str, Any] | None:
        return next((d for d in self.docs.values() if _matches(d, query)), None)

    def find(self, query: dict[str, Any], projection: Any = None, limit: int = 0) -> list[dict[str, Any]]:
        found = [d for d in self.docs.values() if _matches(d, query)]
        return found[:limit] if limit else found

    def delete_many(self, query: dict[str, Any]) -> _Deleted:
        gone = [k for k, d in self.docs.items() if _matches(d, query)]
        for k in gone:
            del self.docs[k]
        return _Deleted(len(gone))


def _worker_log(collection: _Collection) -> DeliveryLog:
    # As the worker builds it (connectors/runtime/worker.py): the retention is the setting's default.
    retention = timedelta(seconds=ConnectSettings().webhook_delivery_retention_s)
    return DeliveryLog(cast(Any, {COLLECTION: collection}), retention)


def test_a_captured_opened_delivery_resent_after_weeks_is_still_a_duplicate(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    collection = _Collection()
    log = _worker_log(collection)
    opened, resolved = (
        connector.dedup_key(connector.read(request), request)
        for request in (request_for(fixture_body("open_anomaly")), request_for(fixture_body("feedback_fixed")))
    )
    assert opened != resolved
    for key in (opened, resolved):
        assert log.record("acme", "montecarlo", f"k:{key}", "accepted", ["e1", "e2"])
    for days in (8, 90, 365):  # the worker's pruning pass (or the TTL index) runs all along
        log.prune(now=datetime.now(UTC) + timedelta(days=days))
        assert log.seen("acme", "montecarlo", f"k:{opened}"), f"forgotten after {days} days: the replay reopens"
    log.prune(now=datetime.now(UTC) + timedelta(days=401))
    assert not log.seen("acme", "montecarlo", f"k:{opened}")  # bounded: the records do expire


def test_a_record_is_small_whatever_the_delivery_published() -> None:
    collection = _Collection()
    log = _worker_log(collection)
    assert log.record("acme", "montecarlo", "k:1", "accepted", [f"{i:036d}" for i in range(5_000)])
    (doc,) = collection.docs.values()
    assert doc["events"] == 5_000 and "event_ids" not in doc
    assert len(repr(doc)) < 400
