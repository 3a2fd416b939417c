from __future__ import annotations

import pytest

from api.problems import Problem
from metalake.http.ratelimit import RateLimiter
from tests._support.fake_clock import FakeClock


def test_burst_then_refill_per_key() -> None:
    clock = FakeClock(0.0)
    limiter = RateLimiter(rate=2.0, burst=3, clock=clock)
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a") == pytest.approx(0.5)
    # Another client has its own bucket.
    assert limiter.acquire("b") == 0.0
    clock.now += 0.5
    assert limiter.acquire("a") == 0.0
    assert limiter.acquire("a") > 0
    # Idle time refills up to the burst, never beyond.
    clock.now += 100
    assert [limiter.acquire("a") for _ in range(3)] == [0.0, 0.0, 0.0]
    assert limiter.acquire("a") > 0


def test_check_raises_429_with_retry_after() -> None:
    clock = FakeClock(0.0)
    limiter = RateLimiter(rate=0.1, burst=1, clock=clock)
    limiter.check("a")
    with pytest.raises(Problem) as err:
        limiter.check("a")
    assert err.value.status == 429
    assert err.value.headers["Retry-After"] == "10"
    assert err.value.body()["type"] == "/problems/rate-limited"


def test_rejects_nonsense_limits() -> None:
    with pytest.raises(ValueError):
        RateLimiter(rate=0, burst=1)
    with pytest.raises(ValueError):
        RateLimiter(rate=1, burst=0)


def test_a_full_table_takes_new_keys_in_constant_time(monkeypatch: pytest.MonkeyPatch) -> None:
    # Reachable without a token through /oauth/token: a flood of new client ids must not cost a scan of the table
    # under the global lock per key (the old eviction was O(n): ~10 ms per new key at 20k keys, 20 s for 2,000).
    import time

    from metalake.http import ratelimit

    monkeypatch.setattr(ratelimit, "_MAX_BUCKETS", 20_000)
    clock = FakeClock(0.0)
    limiter = RateLimiter(rate=1.0, burst=1, clock=clock)
    for i in range(20_000):
        limiter.acquire(f"k{i}")
    started = time.perf_counter()
    for i in range(2_000):
        limiter.acquire(f"flood{i}")
    assert time.perf_counter() - started < 2.0
    assert len(limiter._buckets) == 20_000


def test_eviction_drops_the_least_recently_used_bucket_first(monkeypatch: pytest.MonkeyPatch) -> None:
    from metalake.http import ratelimit

    monkeypatch.setattr(ratelimit, "_MAX_BUCKETS", 3)
    clock = FakeClock(0.0)
    limiter = RateLimiter(rate=0.001, burst=1, clock=clock)
    for key in ("a", "b", "c"):
        limiter.acquire(key)
        clock.now += 1
    assert limiter.acquire("a") > 0  # a is spent, and now the most recently used
    limiter.acquire("d")  # full: b goes, not a
    assert list(limiter._buckets) == ["c", "a", "d"]
    assert limiter.acquire("a") > 0  # a's spent bucket survived the eviction
    clock.now += ratelimit._IDLE_EVICT_S + 10
    limiter.acquire("e")  # every idle bucket goes at once
    assert list(limiter._buckets) == ["e"]


def test_a_request_costing_more_than_the_burst_waits_for_a_full_bucket_not_for_ever() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=10.0, burst=5, clock=lambda: now[0])
    assert limiter.acquire("t", cost=3) == 0.0
    assert limiter.acquire("t", cost=50) == pytest.approx(0.3)  # needs the bucket full again: 3 tokens at 10/s
    now[0] += 0.3
    assert limiter.acquire("t", cost=50) == 0.0


def test_settling_gives_back_an_overestimate_and_takes_an_underestimate_into_debt() -> None:
    now = [0.0]
    limiter = RateLimiter(rate=10.0, burst=20, clock=lambda: now[0])
    assert limiter.acquire("t", 15) == 0.0
    assert limiter.settle("t", 15, 5) == 0.0  # 10 given back: 15 left
    assert limiter.acquire("t", 1) == 0.0  # 14
    # 25 charged (clamped to the burst, 20): 19 more than reserved, the bucket goes to -5; a resend of 20 fits in 2.5 s.
    assert limiter.settle("t", 1, 25) == pytest.approx(2.5)
    assert limiter.acquire("t", 1) == pytest.approx(0.6)  # in debt: refused until it refilled
    now[0] += 2.5
    assert limiter.acquire("t", 20) == 0.0
    assert limiter.settle("other", 0, 1000) == 0.0  # a new key starts full; a cost over the burst is the burst
    assert limiter.settle("other", 0, 1000) == pytest.approx(4.0)  # at most a burst into debt
    now[0] += 4.0
    assert limiter.acquire("other", 20) == 0.0
