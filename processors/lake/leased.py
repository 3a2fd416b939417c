"""Runs under a lease, each in a thread of its own: how the lake worker's queues (erasures, tenant provisioning) run
their items. The lease keeps two workers from running one item; this keeps count of the runs still going, so a poll
claims no more than its concurrency, and lets the worker wait for them when it stops."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from contextlib import ExitStack

from metalake.lease import LeaseHeld, LeaseStore


class LeasedRuns:
    def __init__(self, leases: LeaseStore) -> None:
        self.leases = leases
        self._active: dict[str, threading.Thread] = {}
        self._lock = threading.Lock()

    def running(self) -> int:
        """How many runs are still going (ended ones are forgotten here)."""
        with self._lock:
            for key in [k for k, t in self._active.items() if not t.is_alive()]:
                del self._active[key]
            return len(self._active)

    def busy(self, key: str) -> bool:
        """Whether this worker runs ``key`` now (or did, and :meth:`running` has not looked since it ended)."""
        with self._lock:
            return key in self._active

    def start(self, key: str, ttl_s: float, name: str, run: Callable[[], None]) -> bool:
        """Take the lease ``key`` and call ``run`` in a thread named ``name`` that holds it until ``run`` returns;
        ``False`` (nothing started) if a live holder has it, another worker or a crashed one's unexpired lease."""
        hold = ExitStack()
        try:
            hold.enter_context(self.leases.held(key, ttl_s))
        except LeaseHeld:
            return False

        def holding() -> None:
            with hold:
                run()

        thread = threading.Thread(target=holding, name=name, daemon=True)
        with self._lock:
            self._active[key] = thread
        thread.start()
        return True

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the runs going on now to end, at most ``timeout_s`` in all."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._active.values())
        for thread in threads:
            thread.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
