"""Audit rows committed together: one Delta commit per table per short interval, not one per mutating request.

Every mutating call of the admin API writes an audit row. One delta-rs commit each (a log entry and a small file)
made every request pay a commit and every table's log grow by one entry per action. :class:`AuditBatcher` buffers
rows per table and commits each table's rows in one append every ``interval_s``, or at once when ``max_rows`` are
waiting. ``close`` (the app's shutdown) commits what is left, so a clean stop loses no accepted mutation's row.

What is not guaranteed: a crash (SIGKILL, power loss) loses the rows of the last ``interval_s`` (0.5 s by default)
whose mutations were answered; set ``api.audit_flush_s`` to 0 to commit every row before its response again. A
table whose commit fails keeps its rows and is retried at the next interval; past ``max_buffered`` rows waiting,
new rows are committed by the request itself (and a failure is its error), so a lake outage never grows memory
without bound. Readers that must see every row (the audit routes, a tenant's deprovisioning) call :meth:`flush`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Protocol

from control import audit as control_audit
from control.audit import AuditRow, StorageOptions
from metalake.lake_uri import LakeRoot

log = logging.getLogger(__name__)


class _Append(Protocol):
    def __call__(self, path: LakeRoot, rows: Sequence[AuditRow], storage: StorageOptions = None) -> None: ...


class AuditBatcher:
    def __init__(
        self,
        storage: StorageOptions,
        *,
        interval_s: float,
        max_rows: int,
        max_buffered: int,
        commit: _Append | None = None,
    ) -> None:
        self._storage = storage
        self._interval_s = interval_s
        self._max_rows = max_rows
        self._max_buffered = max_buffered
        # Looked up at each commit by default (control.audit.append), as the unbatched path does.
        self._commit: _Append = commit or (lambda path, rows, storage=None: control_audit.append(path, rows, storage))
        self._state = threading.Condition()
        self._pending: dict[str, tuple[LakeRoot, list[AuditRow]]] = {}
        self._count = 0
        self._closed = False
        self._thread: threading.Thread | None = None
        # One commit at a time: a flush that returns has seen every commit before it end.
        self._committing = threading.Lock()

    def add(self, path: LakeRoot, row: AuditRow) -> bool:
        """Buffer ``row`` for the table at ``path``; False when the caller must commit it itself (closed, or too
        many rows waiting)."""
        with self._state:
            if self._closed or self._count >= self._max_buffered:
                return False
            self._pending.setdefault(str(path), (path, []))[1].append(row)
            self._count += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="audit-batch", daemon=True)
                self._thread.start()
            if self._count >= self._max_rows:
                self._state.notify_all()
        return True

    def flush(self, path: LakeRoot | None = None) -> None:
        """Commit the rows waiting (for ``path`` only, if given) now, in this thread; raises if a commit fails (its
        rows stay buffered)."""
        with self._committing:
            with self._state:
                keys = [str(path)] if path is not None else list(self._pending)
                batches = [self._pending.pop(k) for k in keys if k in self._pending]
                self._count -= sum(len(rows) for _, rows in batches)
            failed: Exception | None = None
            for table, rows in batches:
                try:
                    self._commit(table, rows, self._storage)
                except Exception as exc:  # noqa: BLE001 - kept for the next attempt, whatever the storage raised
                    failed = failed or exc
                    self._restore(table, rows)
            if failed is not None:
                raise failed

    def _restore(self, table: LakeRoot, rows: list[AuditRow]) -> None:
        with self._state:
            waiting = self._pending.setdefault(str(table), (table, []))[1]
            waiting[:0] = rows
            self._count += len(rows)

    def _run(self) -> None:
        failing = False
        while True:
            with self._state:
                # A full buffer is committed at once, unless the last commit failed: then wait out the interval.
                if not self._closed and (failing or self._count < self._max_rows):
                    self._state.wait(self._interval_s)
                if self._closed:
                    return
            try:
                self.flush()
                failing = False
            except Exception as exc:  # noqa: BLE001 - the rows stay buffered; the next interval retries
                failing = True
                log.warning("api.audit_commit_failed", extra={"error": type(exc).__name__})

    def close(self) -> None:
        """Stop the background commits and commit everything still waiting (the app's clean shutdown)."""
        with self._state:
            self._closed = True
            self._state.notify_all()
            thread = self._thread
        if thread is not None:
            thread.join(timeout=30)
        try:
            self.flush()
        except Exception as exc:  # noqa: BLE001 - the operator must know what the audit misses
            log.error("api.audit_rows_lost", extra={"rows": self._count, "error": type(exc).__name__})
