"""The main and the retry loop run in separate threads: a retry probe held by a slow destination (up to a delivery
deadline each) does not stop new changes from being polled and delivered; an error in the retry loop stops both;
a batch that finds MongoDB gone waits for it instead."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from pymongo.errors import AutoReconnect, OperationFailure

from metalake import mongo
from ops.settings import Settings
from processors.outbound.runtime.loops import Loops
from tests._support.sleeps import record_sleeps


class _Main:
    def __init__(self) -> None:
        self.polls = 0

    def process_once(self, handle: Callable[..., None], batch_size: int, timeout_s: float) -> int:
        self.polls += 1
        time.sleep(0.01)
        return 0

    def close(self) -> None:
        pass


class _SlowRetry:
    """Every step is one retry probe of a destination answering a byte a second, until its deadline."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail

    def step(self, max_records: int, timeout_s: float) -> int:
        if self.fail:
            raise RuntimeError("the retry topic is gone")
        time.sleep(1.5)
        return 1

    def close(self) -> None:
        pass


class _Quiet:
    def start(self) -> None:
        pass

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


def _loops(retry: _SlowRetry) -> tuple[Loops, _Main]:
    loops = Loops.__new__(Loops)
    main = _Main()
    loops.settings, loops.outbound = Settings(), _Quiet()  # type: ignore[assignment]
    loops.main, loops.retry, loops.janitor = main, retry, _Quiet()  # type: ignore[assignment]
    loops.stopping, loops._retry_failed = False, None
    return loops, main


def test_a_slow_retry_probe_does_not_hold_new_changes() -> None:
    loops, main = _loops(_SlowRetry())
    runner = threading.Thread(target=loops.run)
    runner.start()
    time.sleep(1.0)
    polled = main.polls
    loops.stopping = True
    runner.join(timeout=5)
    assert not runner.is_alive()
    # With one thread for both loops, the main consumer would have polled once before the first probe held it.
    assert polled >= 20


def test_an_error_in_the_retry_loop_stops_the_runtime_with_it() -> None:
    loops, _ = _loops(_SlowRetry(fail=True))
    failed: list[Any] = []

    def run() -> None:
        with pytest.raises(RuntimeError, match="retry topic is gone") as raised:
            loops.run()
        failed.append(raised.value)

    runner = threading.Thread(target=run)
    runner.start()
    runner.join(timeout=5)
    assert failed and not runner.is_alive()


class _Batches:
    """handle_batch finds MongoDB gone the first ``unreachable`` times (a FerretDB restart), then delivers."""

    def __init__(self, error: Exception, unreachable: int) -> None:
        self.error, self.unreachable, self.calls = error, unreachable, 0

    def handle_batch(self, messages: Any) -> None:
        self.calls += 1
        if self.calls <= self.unreachable:
            raise self.error


def _handling(batches: _Batches, monkeypatch: pytest.MonkeyPatch) -> tuple[Loops, list[float]]:
    pauses = record_sleeps(monkeypatch, mongo)
    loops = Loops.__new__(Loops)
    loops.settings, loops.outbound = Settings(), batches  # type: ignore[assignment]
    return loops, pauses


def test_a_batch_that_finds_mongodb_gone_waits_and_runs_again(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = _Batches(AutoReconnect("127.0.0.1:27017: connection closed"), unreachable=2)
    loops, pauses = _handling(batches, monkeypatch)
    loops._handle([])
    assert batches.calls == 3
    assert pauses == [1.0, 2.0]


def test_a_batch_refused_by_mongodb_still_stops_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    batches = _Batches(OperationFailure("not authorized", 13), unreachable=1)
    loops, pauses = _handling(batches, monkeypatch)
    with pytest.raises(OperationFailure):
        loops._handle([])
    assert (batches.calls, pauses) == (1, [])
