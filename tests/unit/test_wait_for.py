"""The integration tests' poll (tests/_support/itest.py): quick at first, then backing off, never past its deadline."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from tests._support import itest
from tests._support.fake_clock import FakeClock


class _Clock(FakeClock):
    def __init__(self) -> None:
        super().__init__(now=0.0)
        self.pauses: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.pauses.append(round(seconds, 3))
        self.now += seconds


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    # The helper module's own name for `time` only: patching the time module itself would reach every thread.
    fake = _Clock()
    monkeypatch.setattr(itest, "time", SimpleNamespace(monotonic=fake, sleep=fake.sleep))
    return fake


def test_the_pauses_grow_from_the_first_to_the_longest(clock: _Clock) -> None:
    answers = iter([None] * 8 + ["ready"])
    assert itest.wait_for("it", lambda: next(answers), timeout_s=60) == "ready"
    assert clock.pauses == [0.25, 0.375, 0.562, 0.844, 1.266, 1.898, 2.0, 2.0]


def test_a_longer_first_pause_is_kept(clock: _Clock) -> None:
    answers = iter([None, None, "ready"])
    itest.wait_for("it", lambda: next(answers), timeout_s=60, interval_s=5)
    assert clock.pauses == [5, 5]


def test_the_last_pause_ends_at_the_deadline_and_the_failure_names_the_wait(clock: _Clock) -> None:
    with pytest.raises(AssertionError, match=r"timed out after 3s waiting for the rows \(last: 0\)"):
        itest.wait_for("the rows", lambda: 0, timeout_s=3)
    assert sum(clock.pauses) == pytest.approx(3)
    assert clock.pauses[-1] < 1.266
