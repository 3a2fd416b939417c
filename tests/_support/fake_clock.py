"""A clock for code that takes one (``clock: Callable[[], float]``, time.monotonic by default): tests move ``now``.

from tests._support.fake_clock import FakeClock
clock = FakeClock()
cache = TtlCache(5.0, clock=clock)
clock.now += 5.0
"""

from __future__ import annotations


class FakeClock:
    """Seconds that pass only when the test adds to ``now``."""

    def __init__(self, now: float = 100.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now
