"""Delta commits that lose a race are retried; a batch's steps are timed. Shared by the job and the lake commands."""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import delta.exceptions as delta_errors
from opentelemetry import metrics

from metalake.telemetry.metrics import BATCH_STEP

log = logging.getLogger(__name__)
meter = metrics.get_meter(__name__)
conflicts = meter.create_counter(
    "metalake.enrichment.merge_conflicts", description="Delta commits retried after a conflict"
)

CONFLICT_ATTEMPTS = 5
# The exceptions PySpark raises for Delta conflicts subclass these one by one, not their common base.
CONFLICTS = (
    delta_errors.ConcurrentAppendException,
    delta_errors.ConcurrentDeleteDeleteException,
    delta_errors.ConcurrentDeleteReadException,
    delta_errors.ConcurrentTransactionException,
    delta_errors.ConcurrentWriteException,
    delta_errors.DeltaConcurrentModificationException,
    delta_errors.MetadataChangedException,
    delta_errors.ProtocolChangedException,
)


def retry_conflicts(commit: Callable[[], object], table: str) -> None:
    """Run a Delta commit again when a concurrent commit won (a lake command beside the job, a job's two queries on
    one table). Every write here is idempotent (txn ids, version-guarded MERGE, create-if-not-exists), so a rerun is
    safe."""
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            commit()
            return
        except CONFLICTS:
            if attempt == CONFLICT_ATTEMPTS:
                raise
            # The table's name, never its path: a dedicated tenant's path names the tenant.
            conflicts.add(1, {"table": table.rstrip("/").rsplit("/", 1)[-1]})
            log.info("enrichment.conflict_retry", extra={"table": table, "attempt": attempt})
            time.sleep(random.uniform(0.05, 0.3) * attempt)  # noqa: S311 - jitter, not security


class StepTimer:
    """Wall time per step of a batch, logged with the batch so slow steps show up without a profiler, and with a
    ``query`` recorded in ``metalake_batch_step_seconds{query, step}`` (the step names are the code's, bounded)."""

    def __init__(self, query: str | None = None) -> None:
        self.steps: dict[str, float] = {}
        self._lock = threading.Lock()
        self._query = query

    @contextmanager
    def __call__(self, step: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            elapsed = time.monotonic() - started
            with self._lock:
                self.steps[step] = round(self.steps.get(step, 0.0) + elapsed, 3)
            if self._query is not None:
                BATCH_STEP.record(elapsed, {"query": self._query, "step": step})
