"""The one read-through TTL cache of the platform: control-plane records (tenants, clients, connectors,
subscriptions) that hot paths read far more often than anybody changes them.

A value loaded at ``t`` is served until ``t + ttl_s`` (the time is taken before the load, so a slow load does not
stretch its value's life). Changes made elsewhere are therefore seen within ``ttl_s``; changes this process makes
call :meth:`TtlCache.invalidate` (or :meth:`TtlCache.invalidate_where`) to be seen at once. A load that raced with
an invalidation is not stored, so a value read before a change can never overwrite the change. Thread-safe: the
API's request threads and the workers' threads share one cache; loads run outside the lock (two threads missing
the same key may both load it).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass(frozen=True)
class _Entry(Generic[V]):
    value: V
    loaded_at: float


class TtlCache(Generic[K, V]):
    """Values by key, loaded on a miss and served for ``ttl_s`` seconds.

    ``ttl_s <= 0`` makes every value stale at once: each :meth:`get` loads (the last value is still kept for
    ``keep_stale_on_error``). ``max_entries`` bounds memory against a flood of distinct keys: a cache that reaches it
    starts over. ``keep_stale_on_error``: when a reload fails, the expired value is served instead of the error (a
    key never loaded still raises); for routing that must not flip because the store blinked.
    """

    def __init__(
        self,
        ttl_s: float,
        *,
        max_entries: int | None = None,
        keep_stale_on_error: bool = False,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl_s = ttl_s
        self._max_entries = max_entries
        self._keep_stale = keep_stale_on_error
        self._clock = clock
        self._lock = threading.Lock()
        self._entries: dict[K, _Entry[V]] = {}
        self._generation = 0  # bumped by every invalidation: a load that started before one is not stored

    def get(self, key: K, load: Callable[[], V]) -> V:
        """The cached value of ``key`` if fresh, else ``load()`` (stored; an exception from it is raised and nothing
        is stored, unless ``keep_stale_on_error`` has an expired value to serve)."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
            generation = self._generation
        if entry is not None and self._is_fresh(entry, now):
            return entry.value
        try:
            value = load()
        except Exception:
            if entry is None or not self._keep_stale:
                raise
            return entry.value
        self._store({key: value}, now, generation)
        return value

    def get_many(self, keys: Iterable[K], load: Callable[[list[K]], Mapping[K, V]]) -> dict[K, V]:
        """The value of each key: the fresh ones from the cache, the others loaded together in one call of
        ``load(missing)``, which must return a value for each (stored as :meth:`get` stores them; an exception from
        ``load`` is raised and nothing is stored, whatever ``keep_stale_on_error``)."""
        now = self._clock()
        with self._lock:
            generation = self._generation
            entries = {key: self._entries.get(key) for key in keys}
        out = {key: e.value for key, e in entries.items() if e is not None and self._is_fresh(e, now)}
        missing = [key for key in entries if key not in out]
        if missing:
            loaded = dict(load(missing))
            self._store(loaded, now, generation)
            out.update(loaded)
        return out

    def fresh(self, key: K) -> bool:
        """Whether ``key`` has a value that :meth:`get` would serve without loading."""
        now = self._clock()
        with self._lock:
            entry = self._entries.get(key)
        return entry is not None and self._is_fresh(entry, now)

    def _is_fresh(self, entry: _Entry[V], now: float) -> bool:
        return now - entry.loaded_at < self._ttl_s

    def _store(self, values: Mapping[K, V], loaded_at: float, generation: int) -> None:
        with self._lock:
            if self._generation != generation:
                return
            for key, value in values.items():
                if self._max_entries is not None and len(self._entries) >= self._max_entries:
                    self._entries.clear()
                self._entries[key] = _Entry(value, loaded_at)

    def invalidate(self, key: K) -> None:
        """Forget ``key`` (and any load in flight): the next :meth:`get` loads."""
        with self._lock:
            self._generation += 1
            self._entries.pop(key, None)

    def invalidate_where(self, matches: Callable[[K], bool]) -> None:
        """Forget every key ``matches`` accepts (and any load in flight)."""
        with self._lock:
            self._generation += 1
            for key in [k for k in self._entries if matches(k)]:
                del self._entries[key]

    def clear(self) -> None:
        """Forget everything (and any load in flight)."""
        with self._lock:
            self._generation += 1
            self._entries.clear()
