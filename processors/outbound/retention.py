"""Keeps the delivery ledger bounded where the server cannot: a pruning pass on a timer when there is no TTL index.

On MongoDB the TTL index on ``expires_at`` deletes expired ledger documents by itself; FerretDB 1.x refuses TTL
indexes (``NotImplemented``), so the runtime deletes them every ``outbound.ledger_prune_interval_s`` instead, in a
thread of its own: a pass scans the ledger (FerretDB uses no index for the range), which takes seconds on a large
one, and the delivery loops must not wait for it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from pymongo.errors import PyMongoError

from processors.outbound.ledger import Ledger

log = logging.getLogger(__name__)


class LedgerJanitor:
    def __init__(self, ledger: Ledger, interval_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._ledger, self._interval_s, self._clock = ledger, interval_s, clock
        self._pruning = False
        self._next = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def pruning(self) -> bool:
        """Whether this runtime prunes (the server has no TTL index); known after :meth:`start`."""
        return self._pruning

    def start(self, *, background: bool = True) -> None:
        """Create the TTL index, or else prune from now on: in a thread, or (``background=False``) on :meth:`tick`."""
        ttl = self._ledger.ensure_expiry()
        self._pruning = not ttl
        self._next = self._clock()
        log.info(
            "outbound.ledger_expiry",
            extra={"ttl_index": ttl, "retention_s": self._ledger.retention.total_seconds()},
        )
        if self._pruning and background:
            self._thread = threading.Thread(target=self._loop, name="outbound-ledger-prune", daemon=True)
            self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)

    def _loop(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(max(0.0, self._next - self._clock()))

    def tick(self) -> int:
        """Prune if due; the number of documents deleted. A failure is logged and tried again next interval (the
        deliveries report an unreachable ledger themselves)."""
        if not self._pruning or self._clock() < self._next:
            return 0
        self._next = self._clock() + self._interval_s
        started = time.monotonic()
        try:
            removed = self._ledger.prune()
        except PyMongoError as exc:
            log.warning("outbound.ledger_prune_failed", extra={"error_class": type(exc).__name__})
            return 0
        log.info(
            "outbound.ledger_pruned",
            extra={"removed": removed, "duration_ms": round((time.monotonic() - started) * 1000, 1)},
        )
        return removed
