"""Documents that expire: a TTL index where the server has one, a pruning pass on a timer where it has none.

A store whose documents expire writes ``expires_at`` (:func:`expires_at`) on them and implements :class:`Expiring`:
``ensure_expiry`` creates a TTL index on ``expires_at`` (:func:`ensure_ttl_index`: MongoDB then deletes expired
documents itself) and answers ``False`` where the server refuses TTL indexes (FerretDB 1.x answers ``NotImplemented``);
there :class:`ExpiryJanitor` calls ``prune`` at start and then every interval, in a thread of its own: a pass scans the
collection (FerretDB uses no index for the range), which takes seconds on a large one, and the process's own loops
must not wait for it. Several processes pruning one collection only repeat idempotent deletes.

Used by the outbound delivery ledger (``metalake_control.deliveries``) and the connector worker's webhook delivery
log (``metalake_control.webhook_deliveries``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Protocol

from pymongo.collection import Collection
from pymongo.errors import OperationFailure, PyMongoError

log = logging.getLogger(__name__)

EXPIRY_INDEX = "expires_at_ttl"
# MongoDB's code for a command or option the server does not implement (FerretDB 1.x answers TTL indexes with it).
_NOT_IMPLEMENTED = 238


def expires_at(now: datetime, retention: timedelta) -> datetime:
    """When a document written at ``now`` may go. Millisecond precision: what BSON dates keep."""
    moment = now + retention
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def ensure_ttl_index(collection: Collection[Any]) -> bool:
    """Create the TTL index on ``expires_at`` (``expireAfterSeconds: 0``: each document carries its own moment);
    ``False`` if the server has no TTL indexes (then the owner must prune)."""
    try:
        collection.create_index("expires_at", name=EXPIRY_INDEX, expireAfterSeconds=0)
    except OperationFailure as exc:
        if exc.code != _NOT_IMPLEMENTED:
            raise
        return False
    return True


def delete_in_batches(collection: Collection[Any], query: dict[str, Any], batch: int = 500) -> int:
    """Delete what ``query`` matches, ``batch`` ids at a time; how many went.

    Short writes: the collection's owner writes it meanwhile, and FerretDB's backends serialise writes. The query is
    applied again to each batch, so a document refreshed since the find stays.
    """
    removed = 0
    while True:
        ids = [d["_id"] for d in collection.find(query, {"_id": 1}, limit=batch)]
        if not ids:
            return removed
        deleted = collection.delete_many({"_id": {"$in": ids}, **query}).deleted_count
        removed += deleted
        if len(ids) < batch or deleted == 0:
            return removed


class Expiring(Protocol):
    """A store whose documents expire (see the module docstring)."""

    @property
    def retention(self) -> timedelta: ...

    def ensure_expiry(self) -> bool:
        """Create the TTL index; ``False`` if the server has none (then :meth:`prune` must run)."""
        ...

    def prune(self) -> int:
        """Delete the expired documents now; how many went."""
        ...


class ExpiryJanitor:
    """Keeps an :class:`Expiring` store bounded where the server cannot: prunes every ``interval_s`` when there is no
    TTL index. ``name`` prefixes its log events (``<name>_expiry``, ``<name>_pruned``, ``<name>_prune_failed``)."""

    def __init__(
        self, store: Expiring, interval_s: float, *, name: str, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._store, self._interval_s, self._clock = store, interval_s, clock
        self._name = name
        self._pruning = False
        self._next = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def pruning(self) -> bool:
        """Whether this process prunes (the server has no TTL index); known after :meth:`start`."""
        return self._pruning

    @property
    def thread_name(self) -> str:
        return f"{self._name.replace('.', '-').replace('_', '-')}-prune"

    def start(self, *, background: bool = True) -> None:
        """Create the TTL index, or else prune from now on: in a thread, or (``background=False``) on :meth:`tick`."""
        ttl = self._store.ensure_expiry()
        self._pruning = not ttl
        self._next = self._clock()
        log.info(
            f"{self._name}_expiry",
            extra={"ttl_index": ttl, "retention_s": self._store.retention.total_seconds()},
        )
        if self._pruning and background:
            self._thread = threading.Thread(target=self._loop, name=self.thread_name, daemon=True)
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
        store's writers report an unreachable server themselves)."""
        if not self._pruning or self._clock() < self._next:
            return 0
        self._next = self._clock() + self._interval_s
        started = time.monotonic()
        try:
            removed = self._store.prune()
        except PyMongoError as exc:
            log.warning(f"{self._name}_prune_failed", extra={"error_class": type(exc).__name__})
            return 0
        log.info(
            f"{self._name}_pruned",
            extra={"removed": removed, "duration_ms": round((time.monotonic() - started) * 1000, 1)},
        )
        return removed
