"""``while_unreachable``: an idempotent MongoDB write waits for the server to come back, within its bound."""

from __future__ import annotations

import pytest
from pymongo.errors import AutoReconnect, DuplicateKeyError, ServerSelectionTimeoutError

from metalake import mongo
from metalake.mongo import while_unreachable
from tests._support.sleeps import record_sleeps


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
    return record_sleeps(monkeypatch, mongo)


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
