"""Scheduled crawls in the connector worker: every ``connect.schedule_poll_s`` the scheduler looks for RUNNING source
connectors with a ``schedule`` whose next run (last run's start + interval, ``control.connectors.schedule``) is due,
claims each (one worker wins a claim) and crawls it in a thread of its own (at most
``connect.schedule_max_concurrent`` at once; due ones beyond wait for the next look or for another worker).

A crawl runs as ``metalake connect crawl`` runs it (:func:`~connectors.runtime.source_runner.crawl`, its lease
included), with producers of its own: the webhook routes share the runtime's. Its outcome is kept with the schedule
(``last_outcome``, ``last_records``, ``last_error``: our words, never a driver's text) and in the tasks' ``last_run``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from datetime import UTC, datetime

from pymongo.errors import PyMongoError

from connectors.runtime.context import PluginUnavailable, Runtime
from connectors.runtime.errors import TaskFailed
from connectors.runtime.source_runner import CrawlRefused, crawl
from connectors.runtime.tasks import worker_id
from control.connectors.offsets import OffsetsUnavailable
from control.connectors.plugin import SourceConnector
from control.connectors.reasons import public_failure
from control.connectors.records import ConnectorRecord
from control.connectors.schedule import ScheduleStore, next_run
from metalake.kafka import PublishError

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]
NEVER = datetime.min.replace(tzinfo=UTC)


def _utc_now() -> datetime:
    return datetime.now(UTC)


class CrawlScheduler:
    """Claims and runs the due crawls; :meth:`tick` is one look (the thread calls it every poll interval)."""

    def __init__(self, runtime: Runtime, schedules: ScheduleStore, *, clock: Clock = _utc_now) -> None:
        self._runtime = runtime
        self._schedules = schedules
        self._clock = clock
        settings = runtime.settings.connect
        self._poll_s = settings.schedule_poll_s
        self._max = settings.schedule_max_concurrent
        self._pool = ThreadPoolExecutor(max_workers=self._max, thread_name_prefix="scheduled-crawl")
        self._running: dict[str, Future[None]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._me = worker_id()

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="crawl-scheduler", daemon=True)
        self._thread.start()
        log.info("connect.scheduler_started", extra={"poll_s": self._poll_s, "max_concurrent": self._max})

    def stop(self) -> None:
        """Stop looking; crawls already running finish (their lease would keep others out until it expires)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=self._poll_s + 5)
        self._pool.shutdown(wait=True, cancel_futures=True)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self.tick()
            except PyMongoError as exc:  # the control plane is down: look again later
                log.warning("connect.scheduler_unavailable", extra={"error": type(exc).__name__})
            self._stop.wait(self._poll_s)

    def running(self) -> list[str]:
        with self._lock:
            return [cid for cid, future in self._running.items() if not future.done()]

    def tick(self) -> list[str]:
        """Claim and start every due crawl there is room for; the ids of those started."""
        started: list[str] = []
        now = self._clock()
        records = [r for r in self._runtime.store.scheduled_connectors() if r.schedule and self._is_source(r)]
        last = self._schedules.last_starts([r.id for r in records])
        # The least recently started first (never run: first of all), so a few short intervals cannot starve the others
        # when there are more due crawls than room.
        due = sorted(
            (last.get(r.id) or NEVER, r.id, r)
            for r in records
            if r.schedule is not None and next_run(last.get(r.id), r.schedule.interval_s, now) <= now
        )
        for _, _, record in due:
            schedule = record.schedule
            assert schedule is not None  # noqa: S101 - filtered above
            with self._lock:
                self._running = {cid: f for cid, f in self._running.items() if not f.done()}
                if record.id in self._running:
                    continue
                if len(self._running) >= self._max:
                    break
                claimed = self._schedules.claim(
                    record.id, record.tenant, record.name, schedule.interval_s, now, self._me
                )
                if claimed is None:
                    continue
                self._running[record.id] = self._pool.submit(self._run, record, claimed)
            started.append(record.id)
        return started

    def _is_source(self, record: ConnectorRecord) -> bool:
        try:
            return issubclass(self._runtime.plugin_class(record.type), SourceConnector)
        except PluginUnavailable:  # not installed here (or disabled): another worker may have it
            return False

    def _run(self, record: ConnectorRecord, started_at: datetime) -> None:
        tenant, name = record.tenant, record.name
        extra = {"tenant_id": tenant, "connector": name}
        log.info("connect.scheduled_crawl_started", extra=extra)
        records, error = 0, None
        try:
            report = crawl(self._runtime, tenant, name, isolated=True)
            records = report.records
            outcome = "failed" if report.failed else "done"
            error = next((t.error for t in report.tasks if t.error), None)
        except CrawlRefused as exc:
            # Another crawl of it runs (a manual one), or it is PAUSED/FAILED now: the next interval tries again.
            outcome, error = "refused", str(exc)
        except (TaskFailed, PublishError, OffsetsUnavailable) as exc:
            outcome, error = "unavailable", public_failure(exc)
        except Exception as exc:
            outcome, error = "error", public_failure(exc)
            log.warning("connect.scheduled_crawl_error", extra=extra, exc_info=True)
        try:
            self._schedules.finished(record.id, started_at, outcome, records, error, self._clock())
        except PyMongoError:
            log.warning("connect.scheduled_crawl_unrecorded", extra=extra, exc_info=True)
        log.info("connect.scheduled_crawl_done", extra={**extra, "outcome": outcome, "records": records})
