"""Bounded thread pools for the API's blocking work, one per kind, with a per-tenant cap; never an unbounded queue.

Starlette runs every sync step of every route on one shared pool (40 threads). A route that blocks for seconds
(a dead-letter listing scanning Kafka, an audit read through delta-rs, a Snowflake script, a connector's offsets, a
propagation dry run) took one of those threads per request, so one tenant sending forty of them stalled every request
of every tenant, token checks included. Here each kind of heavy work has its own :class:`WorkPool`:

- a request takes a *slot* of its tenant for the kind before anything runs, and gives it back when its work ends
  (also when the client left meanwhile: the work finishes on its thread first, so the pool never holds more running
  work than threads);
- a tenant at its share of the kind is refused at once (429 ``work-concurrency-limit``), a pool whose slots are all
  taken too (503 ``work-busy``), both problem+json with ``Retry-After``: never queued behind other tenants' work;
- ``queue`` extra slots wait for a thread (the token checks' pool: a burst of cheap checks waits, a flood is refused).

The Trino calls have their own pool of the same shape with multi-step slots (:mod:`api.services.trinopool`).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from api.problems import Problem

log = logging.getLogger(__name__)

T = TypeVar("T")
RETRY_AFTER_S = 1


class WorkPool:
    """``workers`` threads for one kind of work; ``workers + queue`` slots, at most ``per_tenant`` per tenant (None:
    no cap of its own, for work whose tenant is not known yet, such as token checks)."""

    def __init__(self, name: str, workers: int, per_tenant: int | None, *, queue: int = 0) -> None:
        if workers <= 0 or (per_tenant is not None and per_tenant <= 0) or queue < 0:
            raise ValueError("workers and per_tenant must be positive, queue not negative")
        self.name = name
        self._slots = workers + queue
        self._per_tenant = per_tenant
        self._executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix=f"work-{name}")
        self._lock = threading.Lock()
        self._active: dict[str, int] = {}
        self._total = 0

    def _refusal(self, tenant: str) -> Problem | None:
        if self._per_tenant is not None and self._active.get(tenant, 0) >= self._per_tenant:
            return Problem(
                429,
                "work-concurrency-limit",
                f"this tenant already runs {self._per_tenant} {self.name} requests at once; retry when one is done",
                headers={"Retry-After": str(RETRY_AFTER_S)},
                extra={"retry_after": RETRY_AFTER_S, "limit": self._per_tenant, "kind": self.name},
            )
        if self._total >= self._slots:
            return Problem(
                503,
                "work-busy",
                f"every {self.name} slot is taken; retry shortly",
                headers={"Retry-After": str(RETRY_AFTER_S)},
                extra={"retry_after": RETRY_AFTER_S, "kind": self.name},
            )
        return None

    def _admit(self, tenant: str) -> None:
        with self._lock:
            refused = self._refusal(tenant)
            if refused is None:
                self._active[tenant] = self._active.get(tenant, 0) + 1
                self._total += 1
        if refused is not None:
            log.info("work.refused", extra={"kind": self.name, "tenant": tenant, "status": refused.status})
            raise refused

    def _free(self, tenant: str) -> None:
        with self._lock:
            left = self._active.get(tenant, 0) - 1
            if left > 0:
                self._active[tenant] = left
            else:
                self._active.pop(tenant, None)
            self._total -= 1

    async def run(self, tenant: str, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401
        """``fn(*args)`` on this pool's threads as ``tenant``'s work, or a 429/503 problem at once."""
        self._admit(tenant)
        try:
            future = self._executor.submit(fn, *args)
        except RuntimeError:  # shut down: the app is stopping
            self._free(tenant)
            raise
        # Freed when the work ends, not when the caller stops waiting (a cancelled request's work still runs).
        future.add_done_callback(lambda _: self._free(tenant))
        return await asyncio.wrap_future(future)

    def active(self, tenant: str) -> int:
        with self._lock:
            return self._active.get(tenant, 0)

    def shutdown(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)


# The kinds of heavy work, each with its own pool (api.context.ApiContext.pools).
DEAD_LETTERS = "dead-letters"
AUDIT = "audit"
SNOWFLAKE = "snowflake-script"
OFFSETS = "connector-offsets"
DRY_RUN = "propagation-dry-run"
SUBSCRIPTION_TEST = "subscription-test"
KINDS = (DEAD_LETTERS, AUDIT, SNOWFLAKE, OFFSETS, DRY_RUN, SUBSCRIPTION_TEST)


class WorkPools:
    """One :class:`WorkPool` per kind of heavy work, built on first use."""

    def __init__(self, workers: int, per_tenant: int) -> None:
        self._pools = {kind: WorkPool(kind, workers, per_tenant) for kind in KINDS}

    def __getitem__(self, kind: str) -> WorkPool:
        return self._pools[kind]

    async def run(self, kind: str, tenant: str, fn: Callable[..., T], *args: Any) -> T:  # noqa: ANN401
        return await self._pools[kind].run(tenant, fn, *args)

    def shutdown(self) -> None:
        for pool in self._pools.values():
            pool.shutdown()
