"""``while_unreachable``: an idempotent MongoDB write waits for the server to come back, within its bound."""

from __future__ import annotations

import threading
import time

import pytest
from pymongo.errors import AutoReconnect, DuplicateKeyError, ServerSelectionTimeoutError

from metalake import mongo
from metalake.mongo import while_unreachable


class _Flaky:
    """Fails with ``error`` ``times`` times, then answers."""

    def __init__(self, error: Exception, times: int) -> None:
        self.error, self.left, self.calls = error, times, 0

    def __call__(self) -> str:
        self.calls += 1
        if self.left:
            self.left -= 1
            raise self.error
        return "written"


@pytest.fixture
def pauses(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The pauses of this test's thread. ``mongo.time`` is the process's one ``time`` module: a thread an earlier test
    of the same worker left running sleeps through it too, and is let sleep for real."""
    slept: list[float] = []
    real_sleep, mine = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is mine:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(mongo.time, "sleep", sleep)
    return slept


def test_an_unreachable_server_is_waited_for_with_growing_pauses(pauses: list[float]) -> None:
    action = _Flaky(ServerSelectionTimeoutError("no server"), times=5)
    assert while_unreachable(action, wait_s=300, what="test") == "written"
    assert action.calls == 6
    assert pauses == [1.0, 2.0, 4.0, 8.0, 10.0]


def test_the_wait_is_bounded_then_the_error_is_raised(pauses: list[float]) -> None:
    action = _Flaky(AutoReconnect("reset"), times=100)
    with pytest.raises(AutoReconnect):
        while_unreachable(action, wait_s=0.5, what="test")
    assert action.calls == 1 and pauses == []


def test_other_errors_are_raised_at_once(pauses: list[float]) -> None:
    action = _Flaky(DuplicateKeyError("dup"), times=1)
    with pytest.raises(DuplicateKeyError):
        while_unreachable(action, wait_s=300, what="test")
    assert action.calls == 1 and pauses == []
