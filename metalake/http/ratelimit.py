"""Rate limits: an in-process token bucket per key (an OAuth client, a tenant, a peer address), refilled
continuously; a request may cost more than one token (the connector worker charges a tenant per event).

In-process on purpose: the API and the connector worker run as one process per host behind a load balancer, and a
per-process bucket bounds what one key can take from that process without a shared store on the hot path. Each
process of a deployment grants the configured rate, so the effective limit is the rate times the number of processes.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from metalake.http.problems import Problem

# Buckets untouched for this long are full again anyway; dropping them bounds memory under many client ids.
_IDLE_EVICT_S = 600.0
_MAX_BUCKETS = 100_000


@dataclass
class _Bucket:
    tokens: float
    updated: float


class RateLimiter:
    """``rate`` requests per second on average, bursts up to ``burst``; thread-safe (sync routes run in threads)."""

    def __init__(self, rate: float, burst: int, *, clock: Callable[[], float] = time.monotonic) -> None:
        if rate <= 0 or burst <= 0:
            raise ValueError("rate and burst must be positive")
        self._rate = rate
        self._burst = float(burst)
        self._clock = clock
        self._lock = threading.Lock()
        # Least recently used first: a full table drops its front in O(1), never scanning under the lock.
        self._buckets: OrderedDict[str, _Bucket] = OrderedDict()

    @property
    def burst(self) -> float:
        """The most tokens a key holds (and the most one request is charged)."""
        return self._burst

    def acquire(self, key: str, cost: float = 1.0) -> float:
        """Take ``cost`` tokens for ``key``: 0.0 when granted, else the seconds until they are available. A cost over
        the burst needs a full bucket (and empties it): a request larger than the burst is slowed, never refused
        for ever."""
        cost = min(cost, self._burst)
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                self._evict(now)
                bucket = self._buckets[key] = _Bucket(self._burst, now)
            else:
                self._buckets.move_to_end(key)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
            bucket.updated = now
            if bucket.tokens >= cost:
                bucket.tokens -= cost
                return 0.0
            return (cost - bucket.tokens) / self._rate

    def settle(self, key: str, reserved: float, actual: float) -> float:
        """Settle a request that :meth:`acquire` admitted for ``reserved`` tokens (an estimate) at ``actual`` (what it
        turned out to cost, at most the burst): the difference is given back or taken. Taken even when the bucket
        lacks it: the work was done, so the bucket goes into debt (down to minus the burst) and refuses the key's next
        requests until it refilled. Returns 0.0 when the bucket covered ``actual``, else the seconds until it holds
        ``actual`` again (a resend of the same request then fits)."""
        actual = min(actual, self._burst)
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                bucket = self._buckets[key] = _Bucket(self._burst, now)
            bucket.tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
            bucket.updated = now
            bucket.tokens = max(-self._burst, min(self._burst, bucket.tokens - (actual - reserved)))
            if bucket.tokens >= 0:
                return 0.0
            return (actual - bucket.tokens) / self._rate

    def waiting(self, key: str) -> float:
        """The seconds until ``key`` has a token (0.0: it has one now), taking none: for buckets charged afterwards,
        by what a request turned out to be (the token endpoint's failed attempts)."""
        now = self._clock()
        with self._lock:
            bucket = self._buckets.get(key)
            if bucket is None:
                return 0.0
            tokens = min(self._burst, bucket.tokens + (now - bucket.updated) * self._rate)
            return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self._rate

    def check(self, key: str, *, charge: bool = True, who: str = "this client", cost: float = 1.0) -> None:
        """Raise a 429 problem with ``Retry-After`` when ``key`` is over its rate; ``charge=False`` refuses an empty
        bucket without taking a token (the caller charges it later with :meth:`acquire`)."""
        wait = self.acquire(key, cost) if charge else self.waiting(key)
        if wait > 0:
            raise rate_limited(wait, who)

    def _evict(self, now: float) -> None:
        """Drop idle buckets from the front (they would be full again anyway), then, if the table is still full, the
        least recently used one (forgetting it only refills it early, it never blocks anyone wrongly). Amortised
        O(1): each bucket is dropped at most once."""
        while self._buckets:
            key, oldest = next(iter(self._buckets.items()))
            if now - oldest.updated <= _IDLE_EVICT_S and len(self._buckets) < _MAX_BUCKETS:
                return
            del self._buckets[key]


def rate_limited(wait: float, who: str) -> Problem:
    """The 429 of a key over its rate, whose ``Retry-After`` is ``wait`` rounded up (at least 1 s)."""
    retry_after = max(1, math.ceil(wait))
    return Problem(
        429,
        "rate-limited",
        f"too many requests for {who}; retry in {retry_after} s",
        headers={"Retry-After": str(retry_after)},
        extra={"retry_after": retry_after},
    )
