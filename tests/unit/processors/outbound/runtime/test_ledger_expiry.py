"""Ledger expiry: when a document may go, what a pruning pass deletes, the retention's lower bound, and the
runtime's pruning timer (only where the server has no TTL index)."""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError
from pymongo.errors import AutoReconnect

from control.subscriptions.settings import OutboundSettings
from metalake.expiry import expires_at
from processors.outbound.runtime.ledger import LedgerScope, expired_query
from processors.outbound.runtime.retention import LedgerJanitor

NOW = datetime(2026, 11, 22, 6, 0, 0, 123456, tzinfo=UTC)
WEEK = timedelta(days=7)


def test_expiry_is_now_plus_the_retention_in_bson_precision() -> None:
    assert expires_at(NOW, WEEK) == datetime(2026, 11, 29, 6, 0, 0, 123000, tzinfo=UTC)
    assert expires_at(NOW, timedelta(seconds=90)) == datetime(2026, 11, 22, 6, 1, 30, 123000, tzinfo=UTC)


def test_the_pruning_query_spares_young_in_flight_steps_and_unexpiring_documents() -> None:
    assert expired_query(NOW, WEEK) == {
        "expires_at": {"$lte": NOW},
        "$or": [{"state": {"$ne": "in_flight"}}, {"started_at": {"$lte": NOW - WEEK}}],
    }


def test_retention_must_cover_the_retry_topic_window() -> None:
    assert OutboundSettings().ledger_retention_s == 7 * 86_400
    OutboundSettings(retry_max_s=60, retry_topic_max_attempts=10, ledger_retention_s=600)
    with pytest.raises(ValidationError, match="shorter than the retry topic's window"):
        OutboundSettings(retry_max_s=60, retry_topic_max_attempts=10, ledger_retention_s=599)


class _Ledger:
    retention = WEEK

    def __init__(self, ttl: bool, fail: bool = False) -> None:
        self.ttl, self.fail, self.prunes = ttl, fail, 0

    def ensure_expiry(self) -> bool:
        return self.ttl

    def prune(self) -> int:
        self.prunes += 1
        if self.fail:
            raise AutoReconnect("ferretdb restarting")
        return 3


def _janitor(ledger: _Ledger, clock: list[float]) -> LedgerJanitor:
    return LedgerJanitor(ledger, 60.0, clock=lambda: clock[0])  # type: ignore[arg-type]


def test_without_a_ttl_index_the_runtime_prunes_at_start_and_then_every_interval() -> None:
    clock, ledger = [100.0], _Ledger(ttl=False)
    janitor = _janitor(ledger, clock)
    janitor.start(background=False)
    assert janitor.pruning
    assert janitor.tick() == 3 and ledger.prunes == 1
    clock[0] = 159.0
    assert janitor.tick() == 0 and ledger.prunes == 1
    clock[0] = 160.0
    assert janitor.tick() == 3 and ledger.prunes == 2


def test_with_a_ttl_index_the_runtime_never_prunes() -> None:
    clock, ledger = [100.0], _Ledger(ttl=True)
    janitor = _janitor(ledger, clock)
    janitor.start(background=False)
    clock[0] = 10_000.0
    assert not janitor.pruning and janitor.tick() == 0 and ledger.prunes == 0


def test_a_failed_pass_is_tried_again_next_interval() -> None:
    clock, ledger = [0.0], _Ledger(ttl=False, fail=True)
    janitor = _janitor(ledger, clock)
    janitor.start(background=False)
    assert janitor.tick() == 0 and ledger.prunes == 1
    clock[0] = 60.0
    assert janitor.tick() == 0 and ledger.prunes == 2


def test_in_the_background_a_pass_runs_at_start_and_stop_ends_the_thread() -> None:
    ledger = _Ledger(ttl=False)
    janitor = LedgerJanitor(ledger, 3600.0)  # type: ignore[arg-type]
    janitor.start()
    deadline = time.monotonic() + 5
    while ledger.prunes == 0 and time.monotonic() < deadline:
        time.sleep(0.01)
    janitor.stop()
    assert ledger.prunes == 1
    assert not any(t.name == "outbound-ledger-prune" for t in threading.enumerate())


class _FlakySteps:
    """A steps collection whose first ``fail`` writes meet an unreachable MongoDB (a FerretDB restart)."""

    def __init__(self, fail: int) -> None:
        self.fail = fail
        self.writes: list[tuple[object, dict[str, dict[str, object]]]] = []

    def update_one(self, query: object, update: dict[str, dict[str, object]]) -> None:
        if self.fail:
            self.fail -= 1
            raise AutoReconnect("connection refused")
        self.writes.append((query, update))


def test_a_performed_step_is_recorded_once_mongodb_is_back_instead_of_ending_the_process() -> None:
    # bench/soak.py: outbound exited when FerretDB restarted right after a webhook was sent, and sent it again.
    steps = _FlakySteps(fail=1)
    scope = LedgerScope(steps, steps, "t", "s", "c")  # type: ignore[arg-type]
    scope.outage_wait_s = 5.0
    scope.done("send", {"status": 200})
    assert len(steps.writes) == 1 and steps.writes[0][1]["$set"]["state"] == "done"
    gone = LedgerScope(_FlakySteps(fail=99), steps, "t", "s", "c")  # type: ignore[arg-type]
    gone.outage_wait_s = 0.5
    with pytest.raises(AutoReconnect):
        gone.done("send", {"status": 200})
