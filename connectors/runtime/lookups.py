"""A short-lived cache of the control-plane reads on the webhook path (which connector, its state and its secrets).

Every delivery used to read the connector and its secrets from MongoDB (two of its four round trips). Entries live
``connect.lookup_cache_ttl_s`` seconds (0 turns the cache off). Every change the worker makes through its management
API or on a connector failure (configuration, pause, resume, restart, a secret rotation, a delete, FAILED)
invalidates the tenant's entries at once. A change made by another process is seen within the TTL. A load that
raced with an invalidation is not stored, so a rotation can never be overwritten by the value read before it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

V = TypeVar("V")

# Bounds memory against a flood of distinct (valid) tenants: past it the cache starts over.
MAX_ENTRIES = 10_000


class LookupCache(Generic[V]):
    """Values by ``(…, tenant, …)`` key with a TTL; thread-safe. The tenant is ``key[tenant_index]``."""

    def __init__(self, ttl_s: float, *, tenant_index: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self._ttl = ttl_s
        self._tenant_index = tenant_index
        self._clock = clock
        self._entries: dict[tuple[Hashable, ...], tuple[float, V]] = {}
        self._lock = threading.Lock()
        self._generation = 0

    def get(self, key: tuple[Hashable, ...], load: Callable[[], V]) -> V:
        """The cached value of ``key``, or ``load()`` (an exception from ``load`` is raised and nothing is cached)."""
        if self._ttl <= 0:
            return load()
        now = self._clock()
        with self._lock:
            hit = self._entries.get(key)
            generation = self._generation
        if hit is not None and hit[0] > now:
            return hit[1]
        value = load()
        with self._lock:
            if self._generation == generation:
                if len(self._entries) >= MAX_ENTRIES:
                    self._entries.clear()
                self._entries[key] = (now + self._ttl, value)
        return value

    def invalidate(self, tenant: str) -> None:
        """Forget every entry of ``tenant`` (and any load of it in flight)."""
        with self._lock:
            self._generation += 1
            for key in [k for k in self._entries if k[self._tenant_index] == tenant]:
                del self._entries[key]
