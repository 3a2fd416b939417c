"""The webhook path's lookup cache: TTL, invalidation per tenant, no stale value stored after an invalidation."""

from __future__ import annotations

import pytest

from connectors.runtime.lookups import LookupCache
from tests._support.fake_clock import FakeClock


class Loader:
    def __init__(self) -> None:
        self.calls = 0

    def __call__(self) -> int:
        self.calls += 1
        return self.calls


def test_a_value_is_reused_within_the_ttl_and_reloaded_after() -> None:
    clock, load = FakeClock(), Loader()
    cache: LookupCache[int] = LookupCache(2.0, clock=clock)
    assert [cache.get(("mc", "acme", None), load) for _ in range(3)] == [1, 1, 1]
    clock.now += 1.9
    assert cache.get(("mc", "acme", None), load) == 1
    clock.now += 0.2
    assert cache.get(("mc", "acme", None), load) == 2 and load.calls == 2


def test_invalidation_drops_the_tenants_entries_only() -> None:
    load = Loader()
    cache: LookupCache[int] = LookupCache(60.0, clock=FakeClock())
    cache.get(("mc", "acme", None), load)
    cache.get(("mc", "other", None), load)
    cache.invalidate("acme")
    assert cache.get(("mc", "acme", None), load) == 3
    assert cache.get(("mc", "other", None), load) == 2


def test_a_load_that_raced_with_an_invalidation_is_not_stored() -> None:
    cache: LookupCache[str] = LookupCache(60.0, clock=FakeClock())

    def stale_read() -> str:
        cache.invalidate("acme")  # e.g. a secret rotation lands while this read is in flight
        return "before-rotation"

    assert cache.get(("mc", "acme", None), stale_read) == "before-rotation"
    assert cache.get(("mc", "acme", None), lambda: "after-rotation") == "after-rotation"


def test_errors_are_not_cached_and_ttl_zero_is_off() -> None:
    cache: LookupCache[int] = LookupCache(60.0, clock=FakeClock())

    def missing() -> int:
        raise LookupError("no such connector")

    with pytest.raises(LookupError):
        cache.get(("mc", "acme", None), missing)
    assert cache.get(("mc", "acme", None), lambda: 7) == 7
    off, load = LookupCache[int](0.0, clock=FakeClock()), Loader()
    assert [off.get(("mc", "acme", None), load) for _ in range(3)] == [1, 2, 3]
