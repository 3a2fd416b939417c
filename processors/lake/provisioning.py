"""The lake worker's provisioning side: it runs the tenant (de)provisioning the admin API queued
(``control.provisioning.queue``), every step of it (``control.provisioning.steps``), so the API starts no subprocess
and needs no Spark, Kafka admin, lake file system or Trino admin connection for it.

It claims a due tenant with its lease (``tenant:<id>``, renewed while it runs; a crashed worker's tenant is claimed
again once its lease expires), runs at most ``provisioning.concurrency`` tenants at a time, each in a thread: the steps
record their progress on the tenant (``GET /v1/tenants/{tenant}`` shows it) and are idempotent, so a rerun after a
crash is safe. The steps' subprocesses (``lake init --dedicated``, ``lake drop``: Spark drivers) run in a process group
of their own, killed after ``provisioning.step_timeout_s`` (the run fails, the step named) or when the worker stops
(nothing is recorded: the next claim runs the step again). Each run ends with the audit rows ``tenant.provision`` or
``tenant.deprovision`` (the platform's audit table; a provisioning also the tenant's).
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from typing import Any

from pymongo import MongoClient
from pymongo.errors import ConnectionFailure

from control import audit as control_audit
from control.audit import AuditRow
from control.provisioning.launcher import launcher_for
from control.provisioning.provisioner import Outcome, Provisioner
from control.provisioning.queue import ProvisioningQueue, tenant_key
from control.provisioning.settings import ProvisioningWorkerSettings
from control.provisioning.steps import StepContext, StepFailed, StepInterrupted
from metalake.lease import LeaseStore
from metalake.s3 import lake_storage_options
from metalake.settings import SettingMissing
from metalake.telemetry.metrics import PROVISIONING_OLDEST, PROVISIONING_QUEUE_DEPTH
from processors.lake.leased import LeasedRuns
from tenants.naming import CONTROL_DATABASE, platform_audit_dir
from tenants.registry import TenantRecord, TenantRegistry, TenantState

log = logging.getLogger("processors.lake.provisioning")

# Who the audit rows of the worker's runs name (the request that queued the work has its own ``accepted`` row).
ACTOR = "metalake-lake-worker"
_TICK_S = 1.0


def run_step_child(argv: Sequence[str], timeout_s: float, stop: threading.Event) -> tuple[int, str]:
    """Run a step's subprocess as the leader of a new process group; its exit code and the tail of its stderr. The
    group (the JVM included) is killed past ``timeout_s`` (:class:`StepFailed`) or once ``stop`` is set
    (:class:`StepInterrupted`)."""
    child = subprocess.Popen(
        list(argv), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        start_new_session=True,
    )  # fmt: skip
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            _, stderr = child.communicate(timeout=max(0.0, min(_TICK_S, deadline - time.monotonic())))
            return child.returncode, (stderr or "")[-2000:]
        except subprocess.TimeoutExpired:
            if stop.is_set() or time.monotonic() >= deadline:
                try:
                    os.killpg(child.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass  # it ended meanwhile
                child.communicate()
                if stop.is_set():
                    raise StepInterrupted(argv[3] if len(argv) > 3 else "step") from None
                raise StepFailed(f"{' '.join(argv[2:4])} ran longer than provisioning.step_timeout_s") from None


def worker_error(exc: Exception) -> str:
    """What a run's error says: our own message whole (a missing setting names its variable), anything else by its
    type (its message may quote a configuration value)."""
    return str(exc) if isinstance(exc, SettingMissing) else type(exc).__name__


def build_provisioner(
    settings: ProvisioningWorkerSettings, mongo: MongoClient[dict[str, Any]], stop: threading.Event
) -> Provisioner:
    """The provisioner with the configured launcher, its steps' subprocesses tied to the worker's ``stop``."""
    timeout_s = settings.provisioning.step_timeout_s
    context = StepContext(
        settings=settings,
        mongo=mongo,
        launcher=launcher_for(settings),
        run=lambda argv: run_step_child(argv, timeout_s, stop),
    )
    return Provisioner(TenantRegistry(mongo[CONTROL_DATABASE]), context)


@dataclass
class ProvisioningWorker:
    settings: ProvisioningWorkerSettings
    mongo: MongoClient[dict[str, Any]]
    # The provisioner a run uses (tests put failing or counting steps in it).
    make_provisioner: Callable[[ProvisioningWorker], Provisioner] | None = None
    stop: threading.Event = field(default_factory=threading.Event)
    # Which tenants this worker looks after: all of them; tests on the shared stack narrow it to their own.
    scope: Callable[[str], bool] = lambda _tenant: True
    clock: Callable[[], datetime] = lambda: datetime.now(UTC)
    ran: list[str] = field(default_factory=list)  # tenants this worker ran (a run that was not interrupted)

    def __post_init__(self) -> None:
        self.control = self.mongo[CONTROL_DATABASE]
        self.queue = ProvisioningQueue(self.control)
        self.runs = LeasedRuns(LeaseStore.in_database(self.control))

    def provisioner(self) -> Provisioner:
        if self.make_provisioner is not None:
            return self.make_provisioner(self)
        return build_provisioner(self.settings, self.mongo, self.stop)

    def poll(self) -> int:
        """Claim due tenants up to the concurrency limit and start each in a thread; returns how many started."""
        limit, started = self.settings.provisioning.concurrency, 0
        if self.runs.running() >= limit:
            return 0
        for record in self.queue.due(self.clock(), self.settings.provisioning.waiting_retry_s):
            if self.runs.running() >= limit or self.stop.is_set():
                break
            key = tenant_key(record.id)
            if self.runs.busy(key) or not self.scope(record.id):
                continue
            ttl_s = self.settings.provisioning.lease_ttl_s
            if self.runs.start(key, ttl_s, f"tenant-{record.id}", partial(self._run, record.id)):
                started += 1
        return started

    def wait(self, timeout_s: float | None = None) -> None:
        """Wait for the runs going on now to end (for tests and shutdown)."""
        self.runs.wait(timeout_s)

    def run(self) -> None:
        """Poll every ``provisioning.poll_s`` until ``stop``; then wait for the runs (their children are killed)."""
        while not self.stop.is_set():
            try:
                self.poll()
            except Exception as exc:  # noqa: BLE001 - MongoDB blinked: the next poll tries again
                log.warning("lake.provisioning_poll_failed", extra={"error": type(exc).__name__})
            self.stop.wait(self.settings.provisioning.poll_s)
        self.wait(timeout_s=30.0)

    def _run(self, tenant: str) -> None:
        try:
            self._run_claimed(tenant)
        except ConnectionFailure as exc:  # MongoDB away: the queue still holds the tenant, the next poll runs it
            log.warning("lake.provisioning_error", extra={"tenant": tenant, "error": type(exc).__name__})
        except Exception as exc:  # noqa: BLE001 - the lease goes once this returns
            self._failed(tenant, exc)

    def _failed(self, tenant: str, exc: Exception) -> None:
        """A run that failed outside its steps (those record their own error): a worker that cannot provision at all,
        a setting missing or its launcher unknown. Recorded on the tenant like a step's failure, so ``GET`` shows it
        and the queue leaves it to an operator instead of running it again every poll."""
        error = f"worker: {worker_error(exc)}"
        log.warning("lake.provisioning_error", extra={"tenant": tenant, "error": error})
        try:
            TenantRegistry(self.control).set_error(tenant, error)
        except ConnectionFailure:
            pass  # not recorded: the next poll runs it again

    def _run_claimed(self, tenant: str) -> None:
        # Read again under the lease: the tenant may have been run, deleted or requeued since the poll listed it.
        registry = TenantRegistry(self.control)
        record = registry.get(tenant)
        if record is None:
            return
        deleting = record.state is TenantState.DELETING
        log.info("lake.provisioning_running", extra={"tenant": tenant, "state": record.state.value})
        prov = self.provisioner()
        outcome = prov.deprovision(tenant) if deleting else prov.provision(tenant)
        if outcome.interrupted:
            log.info("lake.provisioning_interrupted", extra={"tenant": tenant})
            return
        if outcome.ok and not deleting:
            registry.dequeue(tenant, record.queued_at)
        self.ran.append(tenant)
        self._audit(record, "tenant.deprovision" if deleting else "tenant.provision", outcome)

    def _audit(self, record: TenantRecord, action: str, outcome: Outcome) -> None:
        """The run's row in the platform's audit table, and in the tenant's while the tenant is there."""
        result = "done" if outcome.ok else "failed"
        counts: Mapping[str, int] = {"steps": len(outcome.ran), "ms": int(outcome.seconds * 1000)}
        row = AuditRow(datetime.now(UTC), ACTOR, action, control_audit.target_hash(record.id), result, dict(counts))
        storage = lake_storage_options(self.settings)
        try:
            control_audit.append(platform_audit_dir(self.settings.lake_root), [row], storage)
            if action == "tenant.provision" and TenantRegistry(self.control).get(record.id) is not None:
                control_audit.append(record.names(self.settings.lake_root).delta_path("audit"), [row], storage)
        except Exception as exc:  # noqa: BLE001 - the outcome is recorded on the tenant; the audit row is the extra
            log.warning("lake.provisioning_audit_failed", extra={"tenant": record.id, "error": type(exc).__name__})


def watch_queue(
    queue: ProvisioningQueue, clock: Callable[[], datetime] = lambda: datetime.now(UTC)
) -> Callable[[], None]:
    """``metalake_provisioning_queue_depth`` and ``metalake_provisioning_oldest_seconds`` (0 when the queue is empty),
    read from the control plane at scrape time; returns what stops them."""
    stops = [
        PROVISIONING_QUEUE_DEPTH.watch(lambda: [(float(queue.depth()), {})]),
        PROVISIONING_OLDEST.watch(lambda: [(queue.oldest(clock()), {})]),
    ]

    def unwatch() -> None:
        for stop in stops:
            stop()

    return unwatch
