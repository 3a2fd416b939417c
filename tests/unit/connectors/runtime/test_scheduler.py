"""Scheduled crawls: the interval's validation, when a run is due, and the scheduler's claims (one worker per run,
at most ``schedule_max_concurrent`` at once, none while the connector's previous run still runs), with fakes."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, cast

import pytest
from pydantic import ValidationError

from api.services.connector_validation import ConnectorFields, InvalidConfig, check_schedule
from connectors.montecarlo import MonteCarloConnector
from connectors.postgres import PostgresCatalogConnector
from connectors.runtime import scheduler as module
from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.scheduler import CrawlScheduler
from connectors.runtime.source_runner import CrawlRefused, CrawlReport, CrawlSummary
from control.connectors.records import ConnectorRecord
from control.connectors.schedule import Schedule, next_run
from ops.settings import Settings

T0 = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


def test_the_interval_is_bounded_and_for_sources_only() -> None:
    assert ConnectorFields.model_validate({"type": "postgres", "schedule": {"interval_s": 3600}}).schedule == Schedule(
        interval_s=3600
    )
    for bad in ({"interval_s": 0}, {"interval_s": "hourly"}, {"interval_s": 60, "cron": "* * * * *"}, {}):
        with pytest.raises(ValidationError) as err:
            ConnectorFields.model_validate({"type": "postgres", "schedule": bad})
        assert err.value.errors()[0]["loc"][0] == "schedule"
    check_schedule(PostgresCatalogConnector, Schedule(interval_s=300), 300)
    check_schedule(MonteCarloConnector, None, 300)
    with pytest.raises(InvalidConfig) as short:
        check_schedule(PostgresCatalogConnector, Schedule(interval_s=299), 300)
    assert short.value.field == "schedule/interval_s" and "at least 300 seconds" in short.value.detail
    with pytest.raises(InvalidConfig) as webhook:
        check_schedule(MonteCarloConnector, Schedule(interval_s=3600), 300)
    assert webhook.value.field == "schedule"


def test_the_next_run_is_the_last_start_plus_the_interval() -> None:
    assert next_run(None, 60, T0) == T0  # never ran: at once
    assert next_run(T0, 60, T0) == T0 + timedelta(seconds=60)
    # BSON dates come back naive (UTC).
    assert next_run(T0.replace(tzinfo=None), 60, T0) == T0 + timedelta(seconds=60)


class FakeSchedules:
    """The compare-and-set of ScheduleStore in memory: a run is claimed when the last start is old enough."""

    def __init__(self) -> None:
        self.started: dict[str, datetime | None] = {}
        self.finished_runs: list[tuple[str, str, int, str | None]] = []
        self._lock = threading.Lock()

    def claim(
        self, connector_id: str, tenant: str, name: str, interval_s: int, now: datetime, worker: str
    ) -> datetime | None:
        with self._lock:
            last = self.started.get(connector_id)
            if last is not None and last > now - timedelta(seconds=interval_s):
                return None
            self.started[connector_id] = now
            return now

    def last_starts(self, connector_ids: list[str]) -> dict[str, datetime | None]:
        return {cid: self.started.get(cid) for cid in connector_ids}

    def finished(
        self, connector_id: str, started_at: datetime, outcome: str, records: int, error: str | None, now: datetime
    ) -> None:
        self.finished_runs.append((connector_id, outcome, records, error))


@dataclass
class FakeStore:
    records: list[ConnectorRecord] = field(default_factory=list)

    def scheduled_connectors(self) -> list[ConnectorRecord]:
        return [r for r in self.records if r.schedule is not None]


@dataclass
class Clock:
    now: datetime = T0

    def __call__(self) -> datetime:
        return self.now


def _source(name: str, interval_s: int = 60, type_: str = "postgres") -> ConnectorRecord:
    return ConnectorRecord("acme", name, type_, {}, schedule=Schedule(interval_s=interval_s))


def _scheduler(store: FakeStore, schedules: FakeSchedules, clock: Clock, max_concurrent: int = 2) -> CrawlScheduler:
    settings = Settings()
    settings.connect.schedule_max_concurrent = max_concurrent
    runtime = Runtime(
        settings=settings,
        store=cast(Any, store),
        deliveries=cast(Any, None),
        publisher=cast(Any, None),
        offsets=cast(Any, None),
        plugins=plugins_from({"postgres": PostgresCatalogConnector, "montecarlo": MonteCarloConnector}),
        gate=cast(Any, None),
    )
    return CrawlScheduler(runtime, cast(Any, schedules), clock=clock)


class Crawls:
    """Stands in for source_runner.crawl: records each call; ``gate`` holds the crawls until set."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[tuple[str, bool]] = []
        self.gate = threading.Event()
        self.gate.set()
        self.refuse: set[str] = set()
        monkeypatch.setattr(module, "crawl", self)

    def __call__(self, runtime: Runtime, tenant: str, name: str, *, isolated: bool = False) -> CrawlReport:
        self.calls.append((name, isolated))
        self.gate.wait(10)
        if name in self.refuse:
            raise CrawlRefused(f"connector {tenant}/{name} is being crawled already: lease held")
        return CrawlReport(tenant, name, [CrawlSummary(tenant, name, records=7)])


def _drain(scheduler: CrawlScheduler) -> None:
    for _ in range(200):
        if not scheduler.running():
            return
        threading.Event().wait(0.01)
    raise AssertionError("scheduled crawls still running")


def test_a_due_connector_runs_once_per_interval_with_its_own_producers(monkeypatch: pytest.MonkeyPatch) -> None:
    crawls, store, schedules, clock = Crawls(monkeypatch), FakeStore([_source("pg")]), FakeSchedules(), Clock()
    scheduler = _scheduler(store, schedules, clock)
    try:
        assert scheduler.tick() == ["acme/pg"]
        _drain(scheduler)
        assert crawls.calls == [("pg", True)]
        assert schedules.finished_runs == [("acme/pg", "done", 7, None)]
        clock.now = T0 + timedelta(seconds=59)
        assert scheduler.tick() == []  # not due yet
        clock.now = T0 + timedelta(seconds=60)
        assert scheduler.tick() == ["acme/pg"]
        _drain(scheduler)
        assert len(crawls.calls) == 2
    finally:
        scheduler.stop()


def test_two_workers_claim_each_run_once(monkeypatch: pytest.MonkeyPatch) -> None:
    crawls, store, schedules, clock = Crawls(monkeypatch), FakeStore([_source("pg")]), FakeSchedules(), Clock()
    first, second = _scheduler(store, schedules, clock), _scheduler(store, schedules, clock)
    try:
        assert first.tick() + second.tick() == ["acme/pg"]
        _drain(first)
        clock.now = T0 + timedelta(seconds=60)
        assert second.tick() + first.tick() == ["acme/pg"]
        _drain(second)
        assert len(crawls.calls) == 2
    finally:
        first.stop()
        second.stop()


def test_concurrency_is_bounded_and_a_running_crawl_is_not_started_again(monkeypatch: pytest.MonkeyPatch) -> None:
    crawls = Crawls(monkeypatch)
    crawls.gate.clear()  # the crawls hang until released
    store = FakeStore([_source("a", 1), _source("b", 1), _source("c", 1), _source("mc", 1, type_="montecarlo")])
    schedules, clock = FakeSchedules(), Clock()
    scheduler = _scheduler(store, schedules, clock, max_concurrent=2)
    try:
        assert scheduler.tick() == ["acme/a", "acme/b"]  # c waits for room; a webhook connector is never crawled
        clock.now = T0 + timedelta(seconds=5)
        assert scheduler.tick() == []  # a and b still run: neither claimed again, no room for c
        assert "acme/c" not in schedules.started
        crawls.gate.set()
        _drain(scheduler)
        # c, never run, is the longest overdue: it goes first, then a (both a and b last started at T0).
        assert scheduler.tick() == ["acme/c", "acme/a"]
        _drain(scheduler)
        clock.now = T0 + timedelta(seconds=6)
        assert scheduler.tick() == ["acme/b", "acme/a"]  # b waited longest; a and c started together: by id
    finally:
        crawls.gate.set()
        scheduler.stop()


def test_a_refused_crawl_is_recorded_and_tried_at_the_next_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    crawls, store, schedules, clock = Crawls(monkeypatch), FakeStore([_source("pg")]), FakeSchedules(), Clock()
    crawls.refuse.add("pg")  # a manual crawl holds the lease
    scheduler = _scheduler(store, schedules, clock)
    try:
        scheduler.tick()
        _drain(scheduler)
        ((_, outcome, records, error),) = schedules.finished_runs
        assert (outcome, records) == ("refused", 0) and "being crawled already" in (error or "")
    finally:
        scheduler.stop()
