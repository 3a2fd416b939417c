"""``record_sleeps``: a test records its own pauses; a thread an earlier test left running keeps sleeping for real."""

from __future__ import annotations

import threading
import time

import pytest

from metalake import mongo
from tests._support.sleeps import record_sleeps


def test_only_the_tests_own_pauses_are_recorded_and_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    stop, loops = threading.Event(), [0]

    def poller() -> None:  # a monitor thread of the worker: sleeps in a loop
        while not stop.is_set():
            loops[0] += 1
            mongo.time.sleep(0.05)

    thread = threading.Thread(target=poller, daemon=True)
    thread.start()
    pauses = record_sleeps(monkeypatch, mongo)
    started = time.monotonic()
    for seconds in (1.0, 2.0, 4.0):
        mongo.time.sleep(seconds)
    stop.wait(0.3)  # real time for the poller (an Event's wait is no time.sleep)
    stop.set()
    thread.join(timeout=5)
    assert pauses == [1.0, 2.0, 4.0]
    assert time.monotonic() - started < 1.5
    assert loops[0] < 20  # the poller slept 0.05 s a turn, it did not spin
