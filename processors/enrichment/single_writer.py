"""The single-writer rule of a lake on S3, enforced: one Spark driver commits to a Delta table at a time.

Delta's log store for ``s3a://`` is single-driver: two drivers committing the same version both "succeed" and one
commit is lost (measured: 2 drivers x 8 appends left 150 of 160 rows). So every Spark writer of a Delta table on S3
holds the table's **writer lease** (``metalake.lease``, key ``lake-writer:s3://<bucket>/<table>``) while it commits:

- the streaming job's lake query takes the leases of every table it writes at the start of each micro-batch and
  releases them at its end, so a lake command (maintain, erase) gets its turn between two batches and then holds the
  table while it works (the job's next batch waits for it);
- the leases of a set are taken all or none (a refused one releases those taken, then the writer waits and tries
  again), so two writers each needing several tables never deadlock;
- **fencing**: before each commit the holder renews its leases synchronously (:meth:`Fence.check`); a holder that lost
  one (stalled or cut off from MongoDB past ``ttl_s``, and taken over) raises :class:`WriterLeaseLost` instead of
  committing. A background thread renews every third of ``ttl_s`` meanwhile, so a long MERGE keeps its lease;
- a dead holder stops renewing: its leases expire after ``ttl_s`` and the next writer takes them.

What the fence cannot stop: a commit already started when its process stalls past ``ttl_s`` (a JVM pause, MongoDB out
of reach for that long). Keep ``ttl_s`` well above such stalls and the clock skew between hosts.

A local-folder lake takes no lease (Delta's log store for a file system commits with an atomic rename, safe for
several drivers), so the default lake pays nothing. delta-rs writers (the audit tables) take none either: their
commits are conditional PUTs, safe together.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from pymongo.database import Database
from pymongo.errors import PyMongoError

from metalake.lake_settings import LakeWriterLeaseSettings
from metalake.lake_uri import S3_SCHEMES, LakeRoot, S3Path
from metalake.lease import Lease, LeaseHeld, LeaseStore, new_owner

log = logging.getLogger(__name__)

KEY_PREFIX = "lake-writer:"


class WriterLeaseLost(RuntimeError):
    """This writer no longer holds a table's lease (another writer may be committing to it): nothing was committed."""


class WriterLeaseTimeout(LeaseHeld):
    """Another writer held a table's lease longer than this writer waits (``lake.writer_lease.wait_s``)."""


def s3_table(path: LakeRoot | str) -> S3Path | None:
    """The table's location if it is on S3 (the only place that needs a lease), else None."""
    if isinstance(path, S3Path):
        return path
    if isinstance(path, str) and path.startswith(S3_SCHEMES):
        return S3Path.parse(path)
    return None


def lease_key(table: S3Path) -> str:
    """One key per table whatever the URI scheme a writer spells it with (``s3a://`` for Spark, ``s3://``)."""
    return KEY_PREFIX + table.uri("s3")


class Fence:
    """The leases of one holding: :meth:`check` before each commit."""

    def __init__(self, store: LeaseStore | None, leases: list[Lease], ttl_s: float) -> None:
        self._store = store
        self._leases = leases
        self._ttl_s = ttl_s
        self._lock = threading.Lock()

    @property
    def keys(self) -> list[str]:
        return [lease.key for lease in self._leases]

    def check(self) -> None:
        """Renew every lease now (the commit that follows has ``ttl_s`` before any other writer can take over), or
        raise :class:`WriterLeaseLost` if one was lost. No-op without leases (a local lake)."""
        self._renew(strict=True)

    def _renew(self, strict: bool) -> bool:
        if self._store is None or not self._leases:
            return True
        with self._lock:
            renewed: list[Lease] = []
            for lease in self._leases:
                current = self._store.renew(lease, self._ttl_s)
                if current is None:
                    if strict:
                        raise WriterLeaseLost(f"lost the writer lease {lease.key}: another writer took it over")
                    log.warning("lake.writer_lease_lost", extra={"lease": lease.key})
                    return False
                renewed.append(current)
            self._leases = renewed
            return True

    def leases(self) -> list[Lease]:
        with self._lock:
            return list(self._leases)


NO_FENCE = Fence(None, [], 0.0)


class WriterLeases:
    """Takes the writer leases of Delta tables on S3 for a Spark writer (one ``owner`` per process and use)."""

    def __init__(
        self,
        store: LeaseStore,
        settings: LakeWriterLeaseSettings,
        owner: str | None = None,
        *,
        sleep: Callable[[float], None] = time.sleep,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._settings = settings
        self.owner = owner or new_owner()
        self._sleep = sleep
        self._monotonic = monotonic

    @classmethod
    def in_database(cls, database: Database[Any], settings: LakeWriterLeaseSettings) -> WriterLeases:
        """Over the control plane's ``leases`` collection (``database``), beside the other kinds of leases."""
        return cls(LeaseStore.in_database(database), settings)

    def try_acquire(self, keys: list[str]) -> list[Lease] | None:
        """All of ``keys`` or none: a refused key releases those already taken (no hold-and-wait, no deadlock)."""
        taken: list[Lease] = []
        for key in keys:
            lease = self._store.acquire(key, self.owner, self._settings.ttl_s)
            if lease is None:
                for held in taken:
                    self._store.release(held)
                return None
            taken.append(lease)
        return taken

    def acquire(self, keys: list[str], wait_s: float | None = None) -> list[Lease]:
        """Every lease of ``keys``, waiting up to ``wait_s`` (default ``settings.wait_s``) for their holders;
        :class:`WriterLeaseTimeout` naming a holder after that."""
        deadline = self._monotonic() + (self._settings.wait_s if wait_s is None else wait_s)
        waited = False
        while True:
            taken = self.try_acquire(keys)
            if taken is not None:
                if waited:
                    log.info("lake.writer_lease_taken", extra={"leases": keys})
                return taken
            if self._monotonic() >= deadline:
                key = next((k for k in keys if self._held_by_other(k)), keys[0])
                raise WriterLeaseTimeout(key, self._store.holder(key))
            if not waited:
                log.info("lake.writer_lease_wait", extra={"leases": keys})
                waited = True
            self._sleep(self._settings.poll_s)

    def _held_by_other(self, key: str) -> bool:
        holder = self._store.holder(key)
        return holder is not None and holder.get("owner") != self.owner

    @contextmanager
    def holding(self, paths: Iterable[LakeRoot | str], wait_s: float | None = None) -> Iterator[Fence]:
        """Hold the writer leases of the tables of ``paths`` on S3 (sorted, all or none) for the block, renewed in
        the background; released at its end. Tables on a local file system need none (:data:`NO_FENCE`)."""
        keys = sorted({lease_key(t) for t in (s3_table(p) for p in paths) if t is not None})
        if not keys:
            yield NO_FENCE
            return
        fence = Fence(self._store, self.acquire(keys, wait_s), self._settings.ttl_s)
        stop = threading.Event()

        def keep() -> None:
            while not stop.wait(self._settings.ttl_s / 3):
                try:
                    if not fence._renew(strict=False):  # noqa: SLF001 - the fence's own renewal, without raising
                        return  # the next check() raises: nothing more to keep
                except PyMongoError as exc:
                    # MongoDB blinked: the leases last ttl_s from the last renewal; the next tick tries again.
                    log.warning("lake.writer_lease_renewal_failed", extra={"error": type(exc).__name__})

        renewer = threading.Thread(target=keep, name="lake-writer-lease", daemon=True)
        renewer.start()
        try:
            yield fence
        finally:
            stop.set()
            renewer.join(timeout=self._settings.ttl_s)
            for lease in fence.leases():
                try:
                    self._store.release(lease)
                except PyMongoError as exc:
                    # Not released: it expires after ttl_s, the next writer waits that long at most.
                    log.warning("lake.writer_lease_release_failed", extra={"error": type(exc).__name__})


class NoWriterLeases(WriterLeases):
    """For a lake on a local file system (and tests without a control plane): every holding is :data:`NO_FENCE`."""

    def __init__(self) -> None:  # no store: nothing is ever leased
        self.owner = "none"

    @contextmanager
    def holding(self, paths: Iterable[LakeRoot | str], wait_s: float | None = None) -> Iterator[Fence]:
        if any(s3_table(p) is not None for p in list(paths)):
            raise RuntimeError("a Delta table on S3 needs the writer leases of the control plane (WriterLeases)")
        yield NO_FENCE


__all__ = [
    "NO_FENCE",
    "Fence",
    "NoWriterLeases",
    "WriterLeaseLost",
    "WriterLeaseTimeout",
    "WriterLeases",
    "lease_key",
    "s3_table",
]
