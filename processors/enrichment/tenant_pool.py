"""Run the tenants of one micro-batch on a bounded pool of threads, each writing through its own SparkSession.

Why a session per thread: MERGE has no writer options, so Delta takes its idempotency pair (txnAppId/txnVersion)
from the session's SQL conf; two threads on one session would commit each other's pair. ``newSession()`` shares the
SparkContext, the Delta log cache and the static confs (the Delta extension and catalog) but has its own SQL conf.
A session is made once per thread and kept with the thread for the life of the pool.

Failure: the batch fails when any tenant fails (Spark then replays it; every step is idempotent), and only after
every tenant write that had started has ended: no write of a failed batch runs on while Spark replays it. Tenants
not started yet are cancelled.
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, Future, ThreadPoolExecutor, wait
from typing import Generic, TypeVar

S = TypeVar("S")


class TenantPool(Generic[S]):
    """``run(base, tasks)`` calls each task with a session: ``base`` itself when ``parallelism`` is 1 or there is one
    task (on the caller's thread, one after the other, as the job always did), else the worker thread's own session,
    made by ``new_session(base)`` the first time that thread runs a task."""

    def __init__(self, parallelism: int, new_session: Callable[[S], S], name: str = "enrichment-tenant") -> None:
        if parallelism < 1:
            raise ValueError(f"parallelism must be >= 1, got {parallelism}")
        self.parallelism = parallelism
        self._new_session = new_session
        self._local = threading.local()
        self._executor = (
            ThreadPoolExecutor(max_workers=parallelism, thread_name_prefix=name) if parallelism > 1 else None
        )

    def _session(self, base: S) -> S:
        session: S | None = getattr(self._local, "session", None)
        if session is None:
            session = self._new_session(base)
            self._local.session = session
        return session

    def run(self, base: S, tasks: Sequence[Callable[[S], None]]) -> None:
        if self._executor is None or len(tasks) <= 1:
            # Nothing to overlap: on the caller's thread and the batch's own session, as the job always did.
            for task in tasks:
                task(base)
            return

        def on_worker(task: Callable[[S], None]) -> None:
            task(self._session(base))

        # Each task runs in a copy of the caller's context: the batch's trace span stays the parent of its work.
        futures: list[Future[None]] = [
            self._executor.submit(contextvars.copy_context().run, on_worker, task) for task in tasks
        ]
        _, pending = wait(futures, return_when=FIRST_EXCEPTION)
        if pending:
            for f in pending:
                f.cancel()
            wait(pending)  # the ones already running end before the batch fails or returns
        for f in futures:  # in submission order: the first failed tenant in the batch's order
            error = None if f.cancelled() else f.exception()
            if error is not None:
                raise error

    def close(self) -> None:
        if self._executor is not None:
            self._executor.shutdown(wait=True, cancel_futures=True)
