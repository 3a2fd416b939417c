"""The two pollers: each sampled event's document in MongoDB and its row in Trino, looked for until seen or
``timeout``. Kept light so the probe does not become the load: each probe is polled on a backoff of its own (first
soon, then less and less often, up to a cap), MongoDB with one ``find_one`` by key per due probe, Trino with ONE query
per round for every due probe (a ``UNION ALL`` of ``LIMIT 1`` lookups through the tenants' views), rounds at least
``TRINO_ROUND_S`` apart. A time is taken when the answer came back, so it is an upper bound (by at most one poll
interval, or one Trino round: both reported)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from freshness.probes import Probe

#: Per store: first look after, the next after, growth, cap (seconds).
BACKOFF = {"mongodb": (0.1, 0.1, 1.5, 0.5), "trino": (1.0, 1.0, 1.5, 2.0)}
TRINO_ROUND_S = 1.0
TRINO_ROUND_MAX = 200  # lookups in one query; the rest wait for the next round


@dataclass
class Due:
    probe: Probe
    at: float
    interval: float


@dataclass
class Counts:
    polls: int = 0
    rounds: int = 0
    round_s: float = 0.0
    errors: int = 0
    first_error: str = ""


@dataclass
class Poller:
    """One store's pending lookups; ``look`` takes the due probes and returns those found."""

    store: str
    look: Callable[[list[Probe]], set[int]]
    timeout: float
    batch: int = 1
    min_round_s: float = 0.0
    pending: list[Due] = field(default_factory=list)
    counts: Counts = field(default_factory=Counts)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def add(self, probe: Probe) -> None:
        first, interval, _, _ = BACKOFF[self.store]
        with self.lock:
            self.pending.append(Due(probe, probe.acked + first, interval))

    def idle(self) -> bool:
        with self.lock:
            return not self.pending

    def round(self) -> None:
        """Look for the due probes (at most ``batch``); note the found; reschedule the rest; give up on a probe
        ``timeout`` after its acknowledgement (it stays in the report, not visible)."""
        now = time.monotonic()
        with self.lock:  # the oldest due first (none starves); one past the timeout is not asked again
            self.pending = [d for d in self.pending if now - d.probe.acked <= self.timeout]
            due = sorted((d for d in self.pending if d.at <= now), key=lambda d: d.at)[: self.batch]
        if not due:
            return
        started = time.monotonic()
        try:
            found = self.look([d.probe for d in due])
        except Exception as exc:  # noqa: BLE001 - a failed lookup is retried next round, and counted
            found = set()
            self.counts.errors += 1
            self.counts.first_error = self.counts.first_error or f"{type(exc).__name__}: {exc}"[:300]
        done = time.monotonic()
        self.counts.polls += len(due)
        self.counts.rounds += 1
        self.counts.round_s += done - started
        _, _, growth, cap = BACKOFF[self.store]
        with self.lock:
            for d in due:
                if id(d.probe) in found:  # the time it took, even when the answer came after the timeout
                    d.probe.seen[self.store] = done - d.probe.acked
                    self.pending.remove(d)
                else:
                    d.interval = min(d.interval * growth, cap)
                    d.at = done + d.interval

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            started = time.monotonic()
            self.round()
            stop.wait(max(0.02, self.min_round_s - (time.monotonic() - started)))

    def figures(self) -> dict[str, Any]:
        c = self.counts
        return {
            "lookups": c.polls,
            "rounds": c.rounds,
            "mean_round_s": round(c.round_s / c.rounds, 3) if c.rounds else None,
            "errors": c.errors,
            "first_error": c.first_error,
        }
