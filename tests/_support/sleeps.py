"""Recording the pauses a module under test takes, without stalling (or recording) anyone else's.

``module.time`` is the process's one ``time`` module: patching its ``sleep`` patches it for every thread of the
pytest worker. A thread an earlier test left running (a pymongo monitor, a poller of the integration lane sharing the
worker) then spins through its loop and fills the list; a failed comparison of that list once took the worker down
(pytest's diff of millions of items). Only the test's own thread is recorded; the others sleep for real."""

from __future__ import annotations

import threading
import time
from types import ModuleType

import pytest


def record_sleeps(monkeypatch: pytest.MonkeyPatch, module: ModuleType) -> list[float]:
    """Make ``module``'s ``time.sleep`` return at once in the calling thread, and return the list of its pauses."""
    slept: list[float] = []
    real_sleep, mine = time.sleep, threading.current_thread()

    def sleep(seconds: float) -> None:
        if threading.current_thread() is mine:
            slept.append(seconds)
        else:
            real_sleep(seconds)

    monkeypatch.setattr(module.time, "sleep", sleep)
    return slept
