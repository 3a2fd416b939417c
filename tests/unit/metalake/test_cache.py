"""The kernel's TTL cache: freshness, batched loads, invalidation (also of a load in flight), the size bound,
stale-on-error."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from metalake.cache import TtlCache
from tests._support.fake_clock import FakeClock


class Loader:
    """Counts loads and returns the current ``value`` (or raises ``error``)."""

    def __init__(self, value: str = "v1") -> None:
        self.value = value
        self.error: Exception | None = None
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.error is not None:
            raise self.error
        return self.value


def test_a_value_is_served_until_its_ttl_then_reloaded() -> None:
    clock, load = FakeClock(), Loader()
    cache: TtlCache[str, str] = TtlCache(10.0, clock=clock)
    assert cache.get("k", load) == "v1"
    load.value = "v2"
    clock.now += 9.999
    assert cache.get("k", load) == "v1"
    clock.now += 0.001  # exactly ttl_s after the load: stale
    assert cache.get("k", load) == "v2"
    assert load.calls == 2


def test_the_age_counts_from_before_the_load() -> None:
    clock = FakeClock()

    def slow() -> str:
        clock.now += 4.0
        return "v"

    cache: TtlCache[str, str] = TtlCache(5.0, clock=clock)
    cache.get("k", slow)
    clock.now += 1.0  # 5 s after the load started, 1 s after it ended
    load = Loader("again")
    assert cache.get("k", load) == "again"


def test_keys_are_cached_apart() -> None:
    cache: TtlCache[tuple[str, str], str] = TtlCache(10.0, clock=FakeClock())
    assert cache.get(("a", "x"), lambda: "ax") == "ax"
    assert cache.get(("b", "x"), lambda: "bx") == "bx"
    assert cache.get(("a", "x"), lambda: "other") == "ax"


def test_a_zero_ttl_loads_every_time() -> None:
    load = Loader()
    cache: TtlCache[str, str] = TtlCache(0.0, clock=FakeClock())
    cache.get("k", load)
    cache.get("k", load)
    assert load.calls == 2


def test_none_is_a_value_that_is_cached() -> None:
    calls: list[int] = []

    def load() -> str | None:
        calls.append(1)
        return None

    cache: TtlCache[str, str | None] = TtlCache(10.0, clock=FakeClock())
    assert cache.get("k", load) is None
    assert cache.get("k", load) is None
    assert len(calls) == 1


@pytest.mark.parametrize(
    "forget",
    [
        lambda c: c.invalidate("a"),
        lambda c: c.invalidate_where(lambda k: k.startswith("a")),
        lambda c: c.clear(),
    ],
    ids=["invalidate", "invalidate_where", "clear"],
)
def test_invalidation_makes_the_next_get_load(forget: Callable[[TtlCache[str, str]], None]) -> None:
    load = Loader()
    cache: TtlCache[str, str] = TtlCache(60.0, clock=FakeClock())
    cache.get("a", load)
    load.value = "v2"
    forget(cache)
    assert cache.get("a", load) == "v2"


def test_invalidate_where_keeps_the_other_keys() -> None:
    cache: TtlCache[str, str] = TtlCache(60.0, clock=FakeClock())
    cache.get("a1", lambda: "a1")
    cache.get("b1", lambda: "b1")
    cache.invalidate_where(lambda k: k.startswith("a"))
    assert cache.get("b1", lambda: "reloaded") == "b1"
    assert cache.get("a1", lambda: "reloaded") == "reloaded"


def test_a_load_that_raced_with_an_invalidation_is_not_stored() -> None:
    cache: TtlCache[str, str] = TtlCache(60.0, clock=FakeClock())

    def load_then_changed_elsewhere() -> str:
        cache.invalidate("k")  # the change lands while the old value is on its way
        return "old"

    assert cache.get("k", load_then_changed_elsewhere) == "old"
    assert cache.get("k", lambda: "new") == "new"


def test_a_failed_load_raises_and_stores_nothing() -> None:
    load = Loader()
    load.error = RuntimeError("down")
    cache: TtlCache[str, str] = TtlCache(60.0, clock=FakeClock())
    with pytest.raises(RuntimeError):
        cache.get("k", load)
    load.error = None
    assert cache.get("k", load) == "v1"
    assert load.calls == 2


def test_without_keep_stale_a_failed_reload_raises() -> None:
    clock, load = FakeClock(), Loader()
    cache: TtlCache[str, str] = TtlCache(5.0, clock=clock)
    cache.get("k", load)
    clock.now += 6
    load.error = RuntimeError("down")
    with pytest.raises(RuntimeError):
        cache.get("k", load)


def test_keep_stale_serves_the_expired_value_when_a_reload_fails_then_retries() -> None:
    clock, load = FakeClock(), Loader()
    cache: TtlCache[str, str] = TtlCache(5.0, keep_stale_on_error=True, clock=clock)
    cache.get("k", load)
    clock.now += 6
    load.error = RuntimeError("down")
    assert cache.get("k", load) == "v1"
    assert cache.get("k", load) == "v1"
    assert load.calls == 3  # the stale value does not count as fresh: each get tries again
    load.error, load.value = None, "v2"
    assert cache.get("k", load) == "v2"


def test_keep_stale_still_raises_for_a_key_never_loaded() -> None:
    load = Loader()
    load.error = RuntimeError("down")
    cache: TtlCache[str, str] = TtlCache(5.0, keep_stale_on_error=True, clock=FakeClock())
    with pytest.raises(RuntimeError):
        cache.get("k", load)


def test_max_entries_starts_over_when_reached() -> None:
    cache: TtlCache[int, int] = TtlCache(60.0, max_entries=2, clock=FakeClock())
    cache.get(1, lambda: 1)
    cache.get(2, lambda: 2)
    cache.get(3, lambda: 3)  # full: the cache is emptied, then 3 stored
    assert cache.get(3, lambda: -3) == 3
    assert cache.get(1, lambda: -1) == -1


def test_get_many_loads_only_the_missing_and_expired_keys_in_one_call() -> None:
    clock = FakeClock()
    start = clock.now
    cache: TtlCache[str, str] = TtlCache(10.0, clock=clock)
    calls: list[list[str]] = []

    def load(keys: list[str]) -> dict[str, str]:
        calls.append(keys)
        return {key: f"{key}@{clock.now - start:g}" for key in keys}

    assert cache.get_many(["a", "b", "a"], load) == {"a": "a@0", "b": "b@0"}
    clock.now += 5.0
    cache.get("c", lambda: "c@5")
    clock.now += 5.0  # a and b expire, c is 5 s old
    assert cache.get_many(["a", "c", "b"], load) == {"a": "a@10", "c": "c@5", "b": "b@10"}
    assert calls == [["a", "b"], ["a", "b"]]
    assert cache.get_many(["a", "b", "c"], load) == {"a": "a@10", "b": "b@10", "c": "c@5"}
    assert len(calls) == 2


def test_get_many_does_not_store_a_load_that_raced_with_an_invalidation() -> None:
    cache: TtlCache[str, str] = TtlCache(60.0, clock=FakeClock())

    def load_then_changed_elsewhere(keys: list[str]) -> dict[str, str]:
        cache.invalidate("a")
        return dict.fromkeys(keys, "old")

    assert cache.get_many(["a", "b"], load_then_changed_elsewhere) == {"a": "old", "b": "old"}
    assert cache.get_many(["a", "b"], lambda keys: dict.fromkeys(keys, "new")) == {"a": "new", "b": "new"}


def test_fresh_says_whether_get_would_load() -> None:
    clock = FakeClock()
    cache: TtlCache[str, str] = TtlCache(10.0, clock=clock)
    assert not cache.fresh("k")
    cache.get("k", lambda: "v")
    assert cache.fresh("k")
    clock.now += 10.0
    assert not cache.fresh("k")
