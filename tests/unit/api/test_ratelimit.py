from __future__ import annotations

import pytest
from fake_clock import FakeClock

from api.problems import Problem
from api.ratelimit import RateLimiter


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
