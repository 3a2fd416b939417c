"""A short-lived cache of the control-plane reads on the webhook path (which connector, its state and its secrets).

Every delivery used to read the connector and its secrets from MongoDB (two of its four round trips). Entries live
``connect.lookup_cache_ttl_s`` seconds (0 turns the cache off). A change the worker makes itself (a connector it marks
FAILED) invalidates the tenant's entries at once; a change made through the admin API (configuration, pause, resume,
a secret rotation, a delete), another process, is seen within the TTL. A load that
raced with an invalidation is not stored, so a rotation can never be overwritten by the value read before it.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from metalake.cache import TtlCache

V = TypeVar("V")

# Bounds memory against a flood of distinct (valid) tenants: past it the cache starts over.
MAX_ENTRIES = 10_000


class LookupCache(Generic[V]):
    """Values by ``(…, tenant, …)`` key with a TTL; thread-safe. The tenant is ``key[tenant_index]``."""

    def __init__(self, ttl_s: float, *, tenant_index: int = 1, clock: Callable[[], float] = time.monotonic) -> None:
        self._off = ttl_s <= 0  # off: nothing is kept, not even a connector's secrets
        self._tenant_index = tenant_index
        self._cache: TtlCache[tuple[Hashable, ...], V] = TtlCache(ttl_s, max_entries=MAX_ENTRIES, clock=clock)

    def get(self, key: tuple[Hashable, ...], load: Callable[[], V]) -> V:
        """The cached value of ``key``, or ``load()`` (an exception from ``load`` is raised and nothing is cached)."""
        return load() if self._off else self._cache.get(key, load)

    def invalidate(self, tenant: str) -> None:
        """Forget every entry of ``tenant`` (and any load of it in flight)."""
        self._cache.invalidate_where(lambda key: key[self._tenant_index] == tenant)
