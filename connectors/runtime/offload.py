"""Parsing and mapping request bodies off the worker's interpreter: large bodies in a small pool of processes, each
tenant in at most its share of them.

Parsing JSON and mapping it to events is CPU work under the GIL: in the worker's own process, one tenant posting
large OpenLineage events without pause kept the interpreter busy and every other tenant's requests waited for it
(docs/benchmarks.md, issue 21). Here a body of at least ``connect.parse_offload_min_bytes`` is handed to one of
``connect.parse_workers`` processes; a tenant has at most ``connect.parse_per_tenant`` of them at once and its other
bodies wait their turn (never another tenant's: the pool's slots are handed out in the order tenants asked, one
tenant holding no more than its share). The processes run at a lower CPU priority than the worker, so on a busy host
the process that answers every tenant comes first. Smaller bodies are parsed on the worker's threads, as are all of
them with ``parse_workers`` 0.

What runs in a process is a module-level function of bytes and plain values, and what it returns comes back pickled;
the :class:`~metalake.http.problems.Problem` it raises is raised here again. A process that dies (killed, out of
memory) fails its request with 503 and the pool is rebuilt for the next one.
"""

from __future__ import annotations

import asyncio
import logging
import multiprocessing
import os
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass
from typing import Any, TypeVar

from fastapi.concurrency import run_in_threadpool

from control.connectors.settings import ConnectSettings
from metalake.http.problems import Problem

log = logging.getLogger(__name__)

T = TypeVar("T")
# The pool's processes yield the CPU to the worker that serves every tenant (nice(2) adds this to their niceness).
_NICENESS = 10

_executors: dict[int, ProcessPoolExecutor] = {}
_executors_lock = threading.Lock()


def _child_init() -> None:
    try:
        os.nice(_NICENESS)
    except OSError:  # not permitted here: run at the worker's priority
        pass


def _executor(workers: int) -> ProcessPoolExecutor:
    """The process's pool of ``workers`` processes, shared by every app of the process (tests build many)."""
    with _executors_lock:
        executor = _executors.get(workers)
        if executor is None:
            # spawn: the worker holds threads (Kafka, MongoDB clients) that a forked child would inherit half-copied.
            context = multiprocessing.get_context("spawn")
            executor = ProcessPoolExecutor(workers, mp_context=context, initializer=_child_init)
            _executors[workers] = executor
        return executor


def _discard(workers: int, broken: ProcessPoolExecutor) -> None:
    with _executors_lock:
        if _executors.get(workers) is broken:
            del _executors[workers]
    broken.shutdown(wait=False, cancel_futures=True)


@dataclass(frozen=True)
class _Refusal:
    """A :class:`Problem` as plain values (an exception with keyword-only arguments does not unpickle)."""

    status: int
    slug: str
    detail: str
    title: str
    field: str | None
    headers: Mapping[str, str]
    extra: Mapping[str, Any]

    def problem(self) -> Problem:
        return Problem(
            self.status,
            self.slug,
            self.detail,
            title=self.title,
            field=self.field,
            headers=self.headers,
            extra=self.extra,
        )


def _call(fn: Callable[..., Any], args: tuple[Any, ...]) -> tuple[bool, Any]:
    try:
        return True, fn(*args)
    except Problem as exc:
        return False, _Refusal(exc.status, exc.slug, exc.detail, exc.title, exc.field, exc.headers, exc.extra)


def _warm() -> int:
    return os.getpid()


class Offload:
    """Where a body's parsing and mapping runs (see the module's docstring). Its waiting is per event loop."""

    def __init__(self, connect: ConnectSettings) -> None:
        self._workers = connect.parse_workers
        self._per_tenant = connect.parse_per_tenant
        self._min_bytes = connect.parse_offload_min_bytes
        self._lock = threading.Lock()
        self._tenants: dict[str, tuple[asyncio.Semaphore, int]] = {}
        self._slots: asyncio.Semaphore | None = None

    def offloads(self, size: int) -> bool:
        """Whether a body of ``size`` bytes is parsed in the pool (else on a thread of the worker)."""
        return self._workers > 0 and size >= self._min_bytes

    def start(self) -> None:
        """Start the pool's processes now rather than on the first large body (the worker's startup)."""
        if self._workers > 0:
            executor = _executor(self._workers)
            for future in [executor.submit(_warm) for _ in range(self._workers)]:
                future.result()

    async def run(self, tenant: str, size: int, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401
        """``fn(*args)`` for ``tenant``'s body of ``size`` bytes: in the pool, or on a thread for a small body."""
        if not self.offloads(size):
            return await run_in_threadpool(fn, *args)
        release = await self._take(tenant)
        try:
            executor = _executor(self._workers)
            future: Future[tuple[bool, Any]] = executor.submit(_call, fn, args)
        except BaseException:
            release()
            raise
        loop = asyncio.get_running_loop()
        # The slots are given back when the work ends, not when the caller stops waiting for it.
        future.add_done_callback(lambda _: loop.call_soon_threadsafe(release))
        try:
            ok, value = await asyncio.wrap_future(future)
        except BrokenProcessPool:
            _discard(self._workers, executor)
            log.warning("connect.parse_pool_broken", extra={"tenant": tenant, "bytes": size})
            raise Problem(
                503, "unavailable", "the body could not be parsed now; send it again", headers={"Retry-After": "1"}
            ) from None
        if not ok:
            raise value.problem()
        result: T = value
        return result

    async def _take(self, tenant: str) -> Callable[[], None]:
        """Wait for one of ``tenant``'s slots, then one of the pool's; the function that gives both back."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self._workers)
        slots = self._slots
        with self._lock:
            mine, users = self._tenants.get(tenant, (asyncio.Semaphore(self._per_tenant), 0))
            self._tenants[tenant] = (mine, users + 1)

        def leave() -> None:
            with self._lock:
                sem, count = self._tenants[tenant]
                if count > 1:
                    self._tenants[tenant] = (sem, count - 1)
                else:
                    del self._tenants[tenant]

        try:
            await mine.acquire()
        except BaseException:
            leave()
            raise
        try:
            await slots.acquire()
        except BaseException:
            mine.release()
            leave()
            raise

        def release() -> None:
            slots.release()
            mine.release()
            leave()

        return release

    def waiting(self, tenant: str) -> int:
        """``tenant``'s bodies in or waiting for the pool (tests, logs)."""
        with self._lock:
            return self._tenants.get(tenant, (None, 0))[1]
