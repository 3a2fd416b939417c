"""The Trino calls of the SQL endpoint and share links: their own bounded thread pool, with a per-tenant cap.

A Trino call blocks its thread until Trino answers, up to ``settings.sql.timeout_s``. On Starlette's pool, which every
sync step of every route shares (40 threads), 40 slow queries of one tenant stalled all requests of all tenants. Here:

- a query takes a *slot* of its tenant when it is admitted and gives it back when its response ends (rows streamed,
  client gone, or an error), so a tenant runs at most ``max_concurrent_per_tenant`` queries at once;
- a tenant at its cap, or a pool whose slots are all taken, is refused at once (problem+json with ``Retry-After``),
  never queued behind other tenants' queries;
- every blocking step of an admitted query (start, each batch of rows, cancel and close) runs on this pool's threads.
  A query runs one step at a time and there are as many threads as slots, so an admitted step never waits for a
  thread, and the shared pool is not used at all.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

from api.problems import Problem

log = logging.getLogger(__name__)

T = TypeVar("T")
# Queries take seconds: a client told to retry sooner would only be refused again.
RETRY_AFTER_S = 1
_END = object()


class TrinoPool:
    """``workers`` threads (and as many slots) for Trino calls; at most ``per_tenant`` slots per tenant."""

    def __init__(self, workers: int, per_tenant: int) -> None:
        if workers <= 0 or per_tenant <= 0:
            raise ValueError("workers and per_tenant must be positive")
        self._workers = workers
        self._per_tenant = per_tenant
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="trino-call")
        self._lock = threading.Lock()
        self._active: dict[str, int] = {}
        self._total = 0

    def admit(self, tenant: str) -> Slot:
        """A slot of ``tenant``, or a problem at once: 429 when the tenant is at its cap, 503 when the pool is full."""
        with self._lock:
            if self._active.get(tenant, 0) >= self._per_tenant:
                refused: Problem | None = Problem(
                    429,
                    "sql-concurrency-limit",
                    f"this tenant already runs {self._per_tenant} queries (SQL and share links together); retry when "
                    "one has finished",
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                    extra={"retry_after": RETRY_AFTER_S, "limit": self._per_tenant},
                )
            elif self._total >= self._workers:
                refused = Problem(
                    503,
                    "sql-busy",
                    "every query slot is taken; retry shortly",
                    headers={"Retry-After": str(RETRY_AFTER_S)},
                    extra={"retry_after": RETRY_AFTER_S},
                )
            else:
                refused = None
                self._active[tenant] = self._active.get(tenant, 0) + 1
                self._total += 1
        if refused is not None:
            log.info("sql.refused", extra={"tenant": tenant, "status": refused.status})
            raise refused
        return Slot(self, tenant)

    def active(self, tenant: str) -> int:
        with self._lock:
            return self._active.get(tenant, 0)

    # free and submit are Slot's: routes hold a Slot, never a count or a thread of their own.
    def free(self, tenant: str) -> None:
        with self._lock:
            left = self._active.get(tenant, 0) - 1
            if left > 0:
                self._active[tenant] = left
            else:
                self._active.pop(tenant, None)
            self._total -= 1

    def submit(self, fn: Callable[..., T], *args: Any) -> Future[T]:  # noqa: ANN401
        return self._executor.submit(fn, *args)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


class Slot:
    """One admitted query of a tenant: runs its blocking steps on the pool, one at a time; freed once by
    :meth:`finish`, after the step in flight (if any) and the given clean-up have run."""

    def __init__(self, pool: TrinoPool, tenant: str) -> None:
        self._pool = pool
        self.tenant = tenant
        self._lock = threading.Lock()
        self._pending: Future[Any] | None = None
        self._finished = False

    async def run(self, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401
        """``fn(*args)`` on a pool thread. If the caller is cancelled (the client left), the step still completes on
        its thread, and :meth:`finish` waits for it before the clean-up."""
        with self._lock:
            if self._finished:
                raise RuntimeError("the slot is finished")
            future = self._pool.submit(fn, *args)
            self._pending = future
        return await asyncio.wrap_future(future)

    async def iterate(self, chunks: Iterator[T]) -> AsyncIterator[T]:
        """The items of a blocking iterator, each ``next`` on a pool thread (a response body that never touches the
        shared pool)."""
        while True:
            chunk = await self.run(next, chunks, _END)
            if chunk is _END:
                return
            yield chunk

    def finish(self, cleanup: Callable[[], object] | None = None) -> None:
        """Run ``cleanup`` on the pool after the step in flight, then free the slot. Idempotent and non-blocking: it
        is called from ``finally`` blocks of cancelled tasks, where nothing may be awaited."""
        with self._lock:
            if self._finished:
                return
            self._finished = True
            pending = self._pending

        def after_step(_: object = None) -> None:
            if cleanup is None:
                self._pool.free(self.tenant)
                return
            try:
                self._pool.submit(cleanup).add_done_callback(self._cleaned)
            except RuntimeError:  # the pool was shut down (the app is stopping): clean up here
                try:
                    cleanup()
                finally:
                    self._pool.free(self.tenant)

        if pending is None:
            after_step()
        else:
            # Runs at once if the step is done, else on its thread when it ends.
            pending.add_done_callback(after_step)

    def _cleaned(self, future: Future[object] | None) -> None:
        if future is not None and future.exception() is not None:
            log.warning("sql.cleanup_failed", extra={"error": type(future.exception()).__name__})
        self._pool.free(self.tenant)
