"""The webhook delivery log expires like the outbound ledger: ``expires_at`` on every record, a TTL index where the
server has one, else the worker prunes on a timer for as long as its app runs."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from fastapi.testclient import TestClient

from connectors.runtime.dedup import COLLECTION, DeliveryLog, expired_query
from connectors.runtime.worker import create_app
from control.connectors.settings import ConnectSettings
from tests._support.runtime_fakes import World

NOW = datetime(2026, 11, 26, 12, 0, 0, 123456, tzinfo=UTC)
WEEK = timedelta(days=7)


class _Inserts:
    def __init__(self) -> None:
        self.docs: list[dict[str, Any]] = []

    def insert_one(self, doc: dict[str, Any]) -> None:
        self.docs.append(doc)


def test_a_record_expires_the_retention_after_it_was_recorded() -> None:
    collection = _Inserts()
    log = DeliveryLog(cast(Any, {COLLECTION: collection}), timedelta(hours=2))
    assert log.record("acme", "mc", "k:1", "accepted", ["e1"])
    (doc,) = collection.docs
    assert doc["expires_at"] - doc["recorded_at"] <= timedelta(hours=2)
    assert doc["expires_at"] - doc["recorded_at"] > timedelta(hours=2) - timedelta(milliseconds=1)
    assert doc["expires_at"].microsecond % 1000 == 0  # BSON keeps milliseconds


def test_the_pruning_query_also_takes_records_from_before_expiry_by_their_age() -> None:
    assert expired_query(NOW, WEEK) == {
        "$or": [
            {"expires_at": {"$lte": NOW}},
            {"expires_at": {"$exists": False}, "recorded_at": {"$lte": NOW - WEEK}},
        ]
    }


def test_retention_and_interval_are_settings() -> None:
    connect = ConnectSettings()
    assert connect.webhook_delivery_retention_s == 400 * 86_400
    assert connect.webhook_delivery_prune_interval_s == 3_600


def test_the_worker_prunes_while_it_runs_where_the_server_has_no_ttl_index(world: World) -> None:
    world.deliveries.ttl_index = False
    with TestClient(create_app(world.settings, runtime=world.runtime)):
        deadline = time.monotonic() + 5
        while world.deliveries.prunes == 0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert world.deliveries.prunes == 1  # at start; the next pass is an interval (an hour) away
    assert "connect-webhook-deliveries-prune" not in {t.name for t in threading.enumerate()}


def test_with_a_ttl_index_the_worker_never_prunes(client: TestClient, world: World) -> None:
    assert client.get("/healthz").status_code == 200
    assert world.deliveries.prunes == 0
