"""Admission of a request to the worker's HTTP sources (the ingest API, OpenLineage), once its credential named the
tenant and before its body is read: what one tenant may take of the process every tenant shares.

Two checks, each answered 429 problem+json with ``Retry-After`` and ``Connection: close`` (the body is never read,
nothing is accepted):

- the tenant's requests in progress (``connect.tenant_max_in_flight``): its slow or large requests cannot take every
  thread of the worker;
- the tenant's events budget (``connect.tenant_events_per_s``), charged up front by an estimate from the declared body
  size (``connect.tenant_event_bytes`` per event), so a tenant whose budget is spent is refused before its body is
  parsed and mapped, the CPU work the budget exists to bound. :meth:`Ticket.settle` then charges the events the body
  actually produced instead of the estimate, and refuses the request (429, nothing published) when the bucket did
  not cover them. The events are charged also then, and a request refused after it was read and parsed (400, 413)
  keeps its estimate charged: the work was done, so a tenant flooding with bodies that are refused or over its
  budget is held off at admission until its bucket refilled.
"""

from __future__ import annotations

import logging
import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from control.connectors.settings import ConnectSettings
from metalake.http.problems import Problem
from metalake.http.ratelimit import RateLimiter, rate_limited

log = logging.getLogger(__name__)

RETRY_AFTER_S = 1
WHO = "this tenant's events"


def _refused(problem: Problem) -> Problem:
    # The body was not read: closing the connection spares the server reading and discarding it.
    problem.headers["Connection"] = "close"
    return problem


@dataclass
class Ticket:
    """One admitted request: the tenant's budget key and what was charged for it so far."""

    key: str
    reserved: float
    budget: RateLimiter | None
    settled: bool = field(default=False)

    def settle(self, events: int) -> None:
        """Charge ``events`` (what the body produced) in place of the estimate; a 429 if the budget did not cover
        them (nothing may be published then)."""
        if self.budget is None or self.settled:
            return
        self.settled = True
        wait = self.budget.settle(self.key, self.reserved, events)
        if wait > 0:
            raise rate_limited(wait, WHO)


class Admission:
    """Per-tenant requests in progress and the events budget of the worker's HTTP sources; thread-safe."""

    def __init__(self, connect: ConnectSettings) -> None:
        self._max_in_flight = connect.tenant_max_in_flight
        self._event_bytes = connect.tenant_event_bytes
        self._lock = threading.Lock()
        self._in_flight: dict[str, int] = {}

    def estimate(self, content_length: str | None) -> int:
        """The events a body of the declared length is counted as up front (1 without a length)."""
        declared = int(content_length) if content_length and content_length.strip().isdigit() else 0
        return max(1, math.ceil(declared / self._event_bytes))

    def in_flight(self, tenant: str) -> int:
        with self._lock:
            return self._in_flight.get(tenant, 0)

    def _enter(self, tenant: str) -> None:
        with self._lock:
            active = self._in_flight.get(tenant, 0)
            if active < self._max_in_flight:
                self._in_flight[tenant] = active + 1
                return
        log.info("connect.admission_refused", extra={"tenant": tenant, "reason": "in-flight"})
        raise _refused(
            Problem(
                429,
                "tenant-concurrency-limit",
                f"this tenant already has {self._max_in_flight} requests in progress on this worker; retry when one "
                "is answered",
                headers={"Retry-After": str(RETRY_AFTER_S)},
                extra={"retry_after": RETRY_AFTER_S, "limit": self._max_in_flight},
            )
        )

    def _leave(self, tenant: str) -> None:
        with self._lock:
            left = self._in_flight.get(tenant, 0) - 1
            if left > 0:
                self._in_flight[tenant] = left
            else:
                self._in_flight.pop(tenant, None)

    def _reserve(self, tenant: str, content_length: str | None, budget: RateLimiter | None) -> Ticket:
        key = f"tenant:{tenant}"
        if budget is None:
            return Ticket(key, 0.0, None)
        estimate = min(self.estimate(content_length), budget.burst)  # what the budget charges of a larger one
        wait = budget.acquire(key, estimate)
        if wait > 0:
            log.info("connect.admission_refused", extra={"tenant": tenant, "reason": "events-budget"})
            raise _refused(rate_limited(wait, WHO))
        return Ticket(key, float(estimate), budget)

    @contextmanager
    def admit(self, tenant: str, content_length: str | None, budget: RateLimiter | None) -> Iterator[Ticket]:
        """Admit one request of ``tenant`` whose body declares ``content_length`` (a header's text, or None), charging
        ``budget`` (the events budget; None: none), or raise the 429; the request counts as in progress until the
        block ends."""
        self._enter(tenant)
        try:
            ticket = self._reserve(tenant, content_length, budget)
            yield ticket
        finally:
            self._leave(tenant)
