"""The pool that writes a batch's tenants: sessions per thread, overlap, failure, and the batch's step timer."""

from __future__ import annotations

import contextvars
import functools
import threading
import time
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from metalake.settings import EnrichmentSettings
from processors.enrichment.tenant_pool import TenantPool
from processors.enrichment.writer import StepTimer

CURRENT: contextvars.ContextVar[str] = contextvars.ContextVar("current", default="unset")


class Sessions:
    """Stands in for SparkSession.newSession: counts the sessions made and on which thread."""

    def __init__(self) -> None:
        self.made: list[tuple[str, int]] = []
        self._lock = threading.Lock()

    def new(self, base: str) -> str:
        with self._lock:
            session = f"{base}/{len(self.made)}"
            self.made.append((session, threading.get_ident()))
        return session


def test_parallelism_one_runs_in_order_on_the_callers_thread_and_session() -> None:
    sessions = Sessions()
    pool: TenantPool[str] = TenantPool(1, sessions.new)
    seen: list[tuple[int, str, int]] = []

    def task(i: int) -> Callable[[str], None]:
        return lambda s: seen.append((i, s, threading.get_ident()))

    pool.run("base", [task(i) for i in range(4)])
    assert seen == [(i, "base", threading.get_ident()) for i in range(4)]
    assert sessions.made == []
    pool.close()


def test_tenants_overlap_each_thread_has_its_own_session_made_once() -> None:
    sessions = Sessions()
    pool: TenantPool[str] = TenantPool(2, sessions.new)
    barrier = threading.Barrier(2, timeout=10)  # breaks (and fails the test) unless two tasks run at once
    used: list[tuple[str, int]] = []
    lock = threading.Lock()

    def task(session: str) -> None:
        barrier.wait()
        with lock:
            used.append((session, threading.get_ident()))

    for _ in range(3):  # three batches on the same pool
        pool.run("base", [task, task])
    pool.close()
    assert len(used) == 6
    assert all(s != "base" for s, _ in used)
    # One session per worker thread, reused by every later batch, and never shared between threads.
    assert len(sessions.made) == 2
    assert {t for _, t in sessions.made} == {t for _, t in used}
    assert dict(used) == dict(sessions.made)


def test_one_tenant_runs_on_the_batch_session() -> None:
    sessions = Sessions()
    pool: TenantPool[str] = TenantPool(4, sessions.new)
    seen: list[str] = []
    pool.run("base", [seen.append])
    pool.close()
    assert seen == ["base"]
    assert sessions.made == []


def test_a_failed_tenant_fails_the_batch_after_every_started_one_ended() -> None:
    pool: TenantPool[str] = TenantPool(2, lambda base: base)
    started: set[int] = set()
    ended: set[int] = set()
    slow_running = threading.Event()
    lock = threading.Lock()

    def task(i: int) -> None:
        with lock:
            started.add(i)
        try:
            if i == 0:
                slow_running.wait(10)
                raise RuntimeError("tenant 0 failed")
            slow_running.set()
            if i == 1:
                time.sleep(0.5)  # still writing when tenant 0 fails
        finally:
            with lock:
                ended.add(i)

    with pytest.raises(RuntimeError, match="tenant 0 failed"):
        pool.run("base", [functools.partial(lambda i, s: task(i), i) for i in range(6)])
    with lock:
        assert 1 in started
        assert started == ended  # nothing of the failed batch runs on
    pool.close()


def test_tasks_run_in_the_callers_context() -> None:
    pool: TenantPool[str] = TenantPool(2, lambda base: base)
    seen: list[str] = []
    token = CURRENT.set("batch-7")
    try:
        pool.run("base", [lambda s: seen.append(CURRENT.get()) for _ in range(3)])
    finally:
        CURRENT.reset(token)
    pool.close()
    assert seen == ["batch-7"] * 3


def test_parallelism_must_be_positive() -> None:
    with pytest.raises(ValueError, match="parallelism"):
        TenantPool(0, lambda base: base)
    with pytest.raises(ValidationError, match="tenant_parallelism"):
        EnrichmentSettings(tenant_parallelism=0)
    assert EnrichmentSettings().tenant_parallelism == 1


def test_step_timer_adds_up_every_threads_time() -> None:
    timer = StepTimer()

    def work() -> None:
        for _ in range(200):
            with timer("events"):
                pass
            with timer("merge"):
                time.sleep(0.0005)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    # 800 sleeps of >= 0.5 ms each: a lost update (two threads adding to the old value) would show as less.
    assert timer.steps["merge"] >= 0.4
    assert set(timer.steps) == {"events", "merge"}
