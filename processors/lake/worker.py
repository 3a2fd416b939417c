"""The lake worker (``metalake lake worker``): runs the GDPR erasures the admin API queued (``control.erasures``) and
the tenant (de)provisioning it queued (``control.provisioning.queue``, run by ``processors.lake.provisioning`` in a
thread of its own), where Spark work runs, so the API never starts a Spark driver nor any subprocess.

It claims a queued erasure with its lease (``<tenant>/erasure/<id>``, renewed while it runs; a crashed worker's
erasures are claimed again once its leases expire, and a ``running`` erasure whose lease is free is one of those),
runs at most ``erasure.concurrency`` at a time, each as ``python -m processors.lake erase`` in a child process of its
own process group (the worker itself starts no JVM), and kills the group of one that runs longer than
``erasure.timeout_s``: the erasure fails with :data:`TIMED_OUT`. Stopping the worker kills its children and releases
their leases; their erasures stay ``running`` and are claimed again. The erase is idempotent, so a rerun is safe.

The URN reaches the child on its stdin (``--urn -``), never on its command line, which every local user can read
(``ps``, ``/proc/<pid>/cmdline``). The child's stderr is discarded (its lines may quote the URN); its stdout is the
JSON report, of which only the counts are kept.

Queued erasures are taken fairly (:func:`fair_order`): each tenant's oldest first, round-robin over the tenants (a
tenant with an erasure running after those without, then the one served longest ago first); one tenant's long queue
does not hold another's erasure back.
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import Enum
from functools import partial
from pathlib import Path
from typing import Any

from pymongo.database import Database

from control.audit import AuditRow, append
from control.erasures import (
    ErasureRecord,
    ErasureState,
    ErasureStore,
    PendingErasures,
    announcement_id,
    erasure_key,
)
from metalake.http.health import LOOP, serve_health, standard_checks
from metalake.lease import LeaseStore
from metalake.mongo import Doc
from metalake.s3 import lake_storage_options
from metalake.telemetry.metrics import ERASURE_OLDEST, ERASURE_QUEUE_DEPTH
from processors.lake.leased import LeasedRuns
from processors.lake.settings import LakeWorkerSettings
from tenants.registry import TenantRegistry

log = logging.getLogger("processors.lake.worker")

TIMED_OUT = "timed out: the erase ran longer than erasure.timeout_s and was stopped; request it again"
ORPHANED = "interrupted before it could run: request the erasure again"
REFUSED = "refused by the erase command (unknown tenant lake or invalid URN)"
WORKER = "metalake-lake-worker"
# How often a running child is checked for the worker's stop.
_TICK_S = 1.0


class Ending(Enum):
    EXITED = "exited"
    TIMED_OUT = "timed_out"
    STOPPED = "stopped"


@dataclass(frozen=True)
class Outcome:
    ending: Ending
    code: int | None = None
    stdout: str = ""


# (argv, timeout in seconds, stop, the child's stdin) -> how the child ended
EraseRunner = Callable[[Sequence[str], float, threading.Event, str], Outcome]


def run_in_group(argv: Sequence[str], timeout_s: float, stop: threading.Event, stdin: str = "") -> Outcome:
    """Run ``argv`` as the leader of a new process group, ``stdin`` written to its standard input; kill the whole
    group (the JVM the erase starts included) when it runs past ``timeout_s`` or ``stop`` is set."""
    child = subprocess.Popen(
        list(argv),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    deadline = time.monotonic() + timeout_s
    pending: str | None = stdin
    while True:
        try:
            # Only the first call may pass ``input`` (a later one raises ValueError): it goes on writing what is left.
            wait = max(0.0, min(_TICK_S, deadline - time.monotonic()))
            stdout, _ = child.communicate(pending, timeout=wait)
            return Outcome(Ending.EXITED, child.returncode, stdout or "")
        except subprocess.TimeoutExpired:
            pending = None
            if stop.is_set() or time.monotonic() >= deadline:
                ending = Ending.STOPPED if stop.is_set() else Ending.TIMED_OUT
                _kill_group(child)
                return Outcome(ending, child.returncode)


def _kill_group(child: subprocess.Popen[str]) -> None:
    try:
        os.killpg(child.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass  # it ended meanwhile
    child.communicate()


def erase_argv(record: ErasureRecord) -> list[str]:
    """The erase's command line; the URN goes on its stdin (``--urn -``), out of ``ps``'s sight."""
    return [
        sys.executable,
        "-m",
        "processors.lake",
        "erase",
        "--yes",  # the erasure request is the confirmation
        "--tenant",
        record.tenant,
        "--urn",
        "-",
        "--actor",
        record.requested_by,
        # The erase's announcement takes a UUID: one derived from ours, so a resumed erasure announces the same id.
        "--erasure-id",
        announcement_id(record.tenant, record.id),
        *(["--include-children"] if record.include_children else []),
    ]


def fair_order(records: Sequence[ErasureRecord], served: Mapping[str, int] | None = None) -> list[ErasureRecord]:
    """Unfinished erasures (oldest first) in the order to claim them: round-robin over the tenants, each tenant's
    oldest first. Tenants go in turn: one with an erasure running after those without, then the one served longest ago
    first (``served``: when this worker last started one of the tenant's erasures, never-served first), then by their
    oldest erasure. Each poll lists the queue afresh, so without ``served`` the tenant with the oldest erasure would
    always go first."""
    by_tenant: dict[str, list[ErasureRecord]] = {}
    for record in records:
        by_tenant.setdefault(record.tenant, []).append(record)
    busy = {r.tenant for r in records if r.state is ErasureState.RUNNING}
    last = served or {}
    tenants = sorted(by_tenant, key=lambda t: (t in busy, last.get(t, -1), by_tenant[t][0].created_at, t))
    deepest = max((len(queued) for queued in by_tenant.values()), default=0)
    return [by_tenant[t][rank] for rank in range(deepest) for t in tenants if rank < len(by_tenant[t])]


def counts(report: Mapping[str, Any]) -> dict[str, int]:
    """Rows and documents removed, per table and collection: the numbers of the erase report, nothing else."""
    out: dict[str, int] = {}
    for group in ("delta_rows", "mongo_documents", "offsets"):
        for name, value in (report.get(group) or {}).items():
            if isinstance(value, int):
                out[f"{group.split('_')[0]}.{name}"] = value
    return out


@dataclass
class ErasureWorker:
    settings: LakeWorkerSettings
    control: Database[Doc]
    runner: EraseRunner = run_in_group
    # Where the ``erasure.finish`` audit row goes (the tenant's Delta audit table); tests replace it.
    audit: Callable[[ErasureRecord, str, Mapping[str, int]], None] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    ran: list[str] = field(default_factory=list)  # erasure ids this worker finished, for logs and tests
    # Tenant -> the turn at which this worker last started one of its erasures (fair_order's round-robin).
    _served: dict[str, int] = field(default_factory=dict)
    _turns: Iterator[int] = field(default_factory=itertools.count)

    def __post_init__(self) -> None:
        self.store = ErasureStore(self.control)
        self.pending = PendingErasures(self.control)
        self.runs = LeasedRuns(LeaseStore.in_database(self.control))

    # -- claiming -----------------------------------------------------------------------------------------------

    def poll(self, scope: Callable[[str], bool] = lambda _tenant: True) -> int:
        """Claim queued erasures up to the concurrency limit and start each in a thread; returns how many started."""
        started, limit = 0, self.settings.erasure.concurrency
        if self.runs.running() >= limit:
            return 0
        queued = self.store.unfinished()
        waiting = {r.tenant for r in queued}
        self._served = {t: n for t, n in self._served.items() if t in waiting}  # only tenants with a queue
        for record in fair_order(queued, self._served):
            if self.runs.running() >= limit or self.stop.is_set():
                break
            key = erasure_key(record.tenant, record.id)
            if self.runs.busy(key) or not scope(record.tenant):
                continue
            ttl_s = self.settings.erasure.lease_ttl_s
            if self.runs.start(key, ttl_s, f"erase-{record.id}", partial(self._run, record)):
                self._served[record.tenant] = next(self._turns)
                started += 1
        return started

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the erasures running now to end (for tests and shutdown)."""
        self.runs.wait(timeout_s)

    def run(self, ready: Callable[[], None] | None = None) -> None:
        """Poll every ``erasure.poll_s`` until ``stop``; then stop the running children (their leases go)."""
        log.info(
            "lake.worker_started",
            extra={"concurrency": self.settings.erasure.concurrency, "timeout_s": self.settings.erasure.timeout_s},
        )
        if ready is not None:
            ready()
        while not self.stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - MongoDB blinked: the next poll tries again
                log.warning("lake.worker_poll_failed", extra={"error": type(exc).__name__})
            LOOP.beat()  # alive even when MongoDB is away: readiness says which dependency is down
            self.stop.wait(self.settings.erasure.poll_s)
        self.wait(timeout_s=30.0)

    # -- one erasure ----------------------------------------------------------------------------------------------

    def _run(self, claimed: ErasureRecord) -> None:
        try:
            self._erase(claimed)
        except Exception as exc:  # noqa: BLE001 - said on the status resource; the lease goes once this returns
            log.warning(
                "lake.erasure_error",
                extra={"tenant": claimed.tenant, "erasure": claimed.id, "error": type(exc).__name__},
            )
            self._finish(claimed, ErasureState.FAILED, error=f"internal error: {type(exc).__name__}")

    def _erase(self, claimed: ErasureRecord) -> None:
        tenant, erasure_id = claimed.tenant, claimed.id
        record = self.store.get(tenant, erasure_id)  # under the lease now: the listing may be stale
        if record is None or record.state in (ErasureState.DONE, ErasureState.FAILED):
            self.pending.drop(tenant, erasure_id)  # finished meanwhile (or the tenant went)
            return
        urn = self.pending.urn(tenant, erasure_id)
        if urn is None:
            # The URN is written before the status document: without it the erasure cannot run, ever.
            log.warning("lake.erasure_orphaned", extra={"tenant": tenant, "erasure": erasure_id})
            self._finish(record, ErasureState.FAILED, error=ORPHANED)
            return
        self.store.update(tenant, erasure_id, ErasureState.RUNNING)
        log.info("lake.erasure_running", extra={"tenant": tenant, "erasure": erasure_id})
        outcome = self.runner(erase_argv(record), self.settings.erasure.timeout_s, self.stop, urn + "\n")
        if outcome.ending is Ending.STOPPED:
            # The worker stops: the erasure stays running, its lease goes, and a worker claims it again.
            log.info("lake.erasure_interrupted", extra={"tenant": tenant, "erasure": erasure_id})
            return
        if outcome.ending is Ending.TIMED_OUT:
            log.warning("lake.erasure_timed_out", extra={"tenant": tenant, "erasure": erasure_id})
            self._finish(record, ErasureState.FAILED, error=TIMED_OUT)
            return
        if outcome.code == 0:
            try:
                report = json.loads(outcome.stdout)
            except ValueError:
                report = {}
            action = report.get("action_required") if isinstance(report, dict) else None
            self._finish(
                record,
                ErasureState.DONE,
                counts=counts(report) if isinstance(report, dict) else {},
                action_required=action if isinstance(action, str) else None,
            )
            return
        # The command's own error line may quote the URN (e.g. "did you mean ..."): keep only the kind of failure.
        log.warning("lake.erasure_failed", extra={"tenant": tenant, "erasure": erasure_id, "code": outcome.code})
        self._finish(record, ErasureState.FAILED, error=REFUSED if outcome.code == 2 else f"exit code {outcome.code}")

    def _finish(
        self,
        record: ErasureRecord,
        state: ErasureState,
        *,
        counts: Mapping[str, int] | None = None,
        error: str | None = None,
        action_required: str | None = None,
    ) -> None:
        tenant, erasure_id = record.tenant, record.id
        self.store.update(tenant, erasure_id, state, counts=counts or {}, error=error, action_required=action_required)
        self.pending.drop(tenant, erasure_id)
        self.ran.append(erasure_id)
        result = "done" if state is ErasureState.DONE else "failed"
        audit = self.audit or self._audit
        try:
            audit(record, result, counts or {})
        except Exception as exc:  # noqa: BLE001 - the erasure's outcome is recorded; the audit row is the extra
            log.warning("lake.erasure_audit_failed", extra={"tenant": tenant, "error": type(exc).__name__})

    def _audit(self, record: ErasureRecord, result: str, numbers: Mapping[str, int]) -> None:
        """The ``erasure.finish`` row of the tenant's audit table (the target as its hash, as every audit row)."""
        tenant = TenantRegistry(self.control).get(record.tenant)
        if tenant is None:
            return  # deleted meanwhile: its audit table went with it
        row = AuditRow(
            datetime.now(UTC), record.requested_by, "erasure.finish", record.target_hash, result, dict(numbers)
        )
        append(tenant.names(self.settings.lake_root).delta_path("audit"), [row], lake_storage_options(self.settings))


def watch_queue(store: ErasureStore, clock: Callable[[], datetime] = lambda: datetime.now(UTC)) -> Callable[[], None]:
    """``metalake_erasure_queue_depth`` and ``metalake_erasure_oldest_seconds`` (0 when the queue is empty), read
    from the control plane at scrape time; returns what stops them."""

    def oldest() -> list[tuple[float, dict[str, str]]]:
        at = store.oldest_unfinished()
        if at is None:
            return [(0.0, {})]
        at = at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # pymongo's naive UTC
        return [(max(0.0, (clock() - at).total_seconds()), {})]

    stops = [
        ERASURE_QUEUE_DEPTH.watch(lambda: [(float(store.count_unfinished()), {})]),
        ERASURE_OLDEST.watch(oldest),
    ]

    def unwatch() -> None:
        for stop in stops:
            stop()

    return unwatch


def _stop_on_signals(stop: threading.Event) -> None:
    def on_signal(_signum: int, _frame: object) -> None:
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)


def worker_report(settings: LakeWorkerSettings, ready_file: Path | None = None) -> dict[str, Any]:
    """``metalake lake worker``: run until SIGTERM or SIGINT; the report says how many erasures and tenant runs it
    finished."""
    from metalake.mongo import mongo_client
    from processors.lake.provisioning import ProvisioningWorker
    from processors.lake.provisioning import watch_queue as watch_provisioning
    from tenants.naming import CONTROL_DATABASE

    mongo = mongo_client(settings)
    worker = ErasureWorker(settings, mongo[CONTROL_DATABASE])
    # One stop for both: stopping the worker kills the steps' subprocesses too (their tenants are claimed again).
    tenants = ProvisioningWorker(settings, mongo, stop=worker.stop)
    provisioning = threading.Thread(target=tenants.run, name="provisioning", daemon=True)

    _stop_on_signals(worker.stop)

    def ready() -> None:
        if ready_file is not None:
            ready_file.parent.mkdir(parents=True, exist_ok=True)
            ready_file.write_text("started\n")

    # The erases it runs read and write the lake, MongoDB, and publish their changes to Kafka.
    health = serve_health(settings, "lake_worker", standard_checks(settings, "mongo", "kafka", "lake"))
    unwatch = [watch_queue(worker.store), watch_provisioning(tenants.queue)]
    if settings.provisioning.enabled:
        provisioning.start()
    try:
        worker.run(ready)
    finally:
        if provisioning.is_alive():
            provisioning.join(timeout=35.0)
        for stop in unwatch:
            stop()
        if health is not None:
            health.close()
        mongo.close()
    return {"worker": WORKER, "erasures_finished": len(worker.ran), "tenants_run": len(tenants.ran)}
