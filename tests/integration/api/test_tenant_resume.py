"""Tenant (de)provisioning the admin API queued is run by the lake worker, once, under a lease in the real control
plane (FerretDB): two workers never run one tenant, a live holder is left alone, a dead holder's tenant is taken
over, a failed run waits for an operator while a waiting step is retried, a worker that stops mid-step leaves the
tenant queued for the next one (its step's process group killed), and queued work with the real steps is finished
without any request. (Erasures: tests/integration/test_erasure_worker.py.)

The workers run in the test's process, scoped to the test's tenants (the stack's lake worker runs erasures only in
the integration session, tests/integration/conftest.py)."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from control.provisioning.provisioner import Provisioner
from control.provisioning.queue import tenant_key
from control.provisioning.steps import Step, StepContext, StepWaiting
from metalake.lease import LEASES, LeaseStore
from metalake.settings import required
from ops.settings import Settings
from ops.stack.launcher import LocalProcessLauncher
from processors.lake.provisioning import ProvisioningWorker, run_step_child
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for
from tenants.registry import TENANTS_COLLECTION, TenantRecord, TenantRegistry, TenantState
from tests._support.itest import wait_for
from tests._support.provisioning import provisioning_worker

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
LONG_AGO = datetime.now(UTC) - timedelta(hours=1)


class SlowStep:
    """A step that takes a while and counts its runs (so an overlap of two runners would show)."""

    name = "slow"

    def __init__(self) -> None:
        self.runs = 0
        self.lock = threading.Lock()

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        with self.lock:
            self.runs += 1
        time.sleep(1.0)

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        return None


def _queued(control: Mongo, tenant: str, state: TenantState = TenantState.PROVISIONING) -> TenantRegistry:
    """A tenant the API queued an hour ago, whose worker died before it took its lease."""
    registry = TenantRegistry(control[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    registry.set_state(tenant, state)
    old = {"updated_at": LONG_AGO, "queued_at": LONG_AGO}
    control[CONTROL_DATABASE][TENANTS_COLLECTION].update_one({"_id": tenant}, {"$set": old})
    return registry


def _cleanup(control: Mongo, tenant: str) -> None:
    control[CONTROL_DATABASE][TENANTS_COLLECTION].delete_one({"_id": tenant})
    control[CONTROL_DATABASE][LEASES].delete_one({"_id": tenant_key(tenant)})


def _worker(
    settings: Settings, mongo: Mongo, tenants: set[str], steps: tuple[Step, ...], **tuning: Any
) -> ProvisioningWorker:
    """A worker (not started: the test polls it) with ``steps`` instead of the real ones."""
    section = settings.provisioning.model_copy(update=tuning)
    tuned = settings.model_copy(update={"provisioning": section})
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    context = StepContext(tuned, mongo, LocalProcessLauncher(tuned))
    return ProvisioningWorker(
        tuned, mongo, lambda _w: Provisioner(registry, context, steps), scope=lambda t: t in tenants
    )


def test_two_workers_run_a_queued_tenant_once(settings: Settings, control: Mongo, tenant: str) -> None:
    registry = _queued(control, tenant)
    step = SlowStep()
    # Each worker has its own client, as two lake worker processes would.
    clients: list[Mongo] = [MongoClient(settings.mongo_uri, tz_aware=True) for _ in range(2)]
    workers = [_worker(settings, client, {tenant}, (step,)) for client in clients]
    try:
        threads = [threading.Thread(target=w.poll) for w in workers]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for worker in workers:
            worker.wait(30)
        assert step.runs == 1
        assert sorted(len(w.ran) for w in workers) == [0, 1]
        record = registry.get(tenant)
        assert record is not None and record.state is TenantState.ACTIVE and "slow" in record.steps
        assert record.queued_at is None  # off the queue
        assert LeaseStore(control[CONTROL_DATABASE][LEASES]).holder(tenant_key(tenant)) is None  # released
        # Nothing left to run.
        assert workers[0].poll() == 0
        assert step.runs == 1
    finally:
        for client in clients:
            client.close()
        _cleanup(control, tenant)


def test_a_live_holder_is_left_alone_and_a_dead_ones_tenant_taken_over(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    registry = _queued(control, tenant)
    step = SlowStep()
    worker = _worker(settings, control, {tenant}, (step,))
    leases = control[CONTROL_DATABASE][LEASES]
    key = tenant_key(tenant)
    try:
        # Another worker is running it (its lease is live): not touched, even though the tenant was queued long ago.
        leases.insert_one(
            {"_id": key, "owner": "worker-b:1:live", "expires_at": datetime.now(UTC) + timedelta(seconds=60)}
        )
        assert worker.poll() == 0
        assert step.runs == 0

        # That worker died: its lease expired, so the tenant is taken over.
        leases.update_one({"_id": key}, {"$set": {"expires_at": datetime.now(UTC) - timedelta(seconds=1)}})
        assert worker.poll() == 1
        worker.wait(30)
        assert (step.runs, worker.ran) == (1, [tenant])
        record = registry.get(tenant)
        assert record is not None and record.state is TenantState.ACTIVE and record.queued_at is None

        # A tenant whose last run failed (error recorded) waits for an operator instead...
        registry.set_state(tenant, TenantState.PROVISIONING, error="step lake: exit 1")
        assert worker.poll() == 0
        # ... who queues it again (POST .../provision): its error goes and the worker runs it.
        registry.queue(tenant)
        assert worker.poll() == 1
        worker.wait(30)
        assert worker.ran == [tenant, tenant]
    finally:
        _cleanup(control, tenant)


class WaitsOnce:
    """A step that waits on another component (as the lake step does while the shared tables are not registered)
    on its first run and succeeds after."""

    name = "waits"

    def __init__(self) -> None:
        self.runs = 0

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        self.runs += 1
        if self.runs == 1:
            raise StepWaiting("shared tables not registered in Trino yet: events")

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        return None


def test_a_waiting_step_is_retried_by_the_worker_and_a_failed_one_is_not(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    failed = f"{tenant}-f"
    registry = _queued(control, tenant)
    _queued(control, failed)
    registry.set_error(failed, "step lake: lake init exited with 1")
    step = WaitsOnce()
    worker = _worker(settings, control, {tenant, failed}, (step,), waiting_retry_s=2.0)
    try:
        assert worker.poll() == 1  # the failed one is not due
        worker.wait(30)
        waiting = registry.get(tenant)
        assert (
            waiting is not None
            and waiting.error == "step waits waiting: shared tables not registered in Trino yet: events"
        )
        assert worker.poll() == 0  # not retried at once
        time.sleep(2.0)
        assert worker.poll() == 1
        worker.wait(30)
        record = registry.get(tenant)
        assert record is not None and (record.state, record.error, record.queued_at) == (TenantState.ACTIVE, None, None)
        still = registry.get(failed)
        assert still is not None and still.state is TenantState.PROVISIONING and still.error is not None
        assert still.queued_at is not None  # still counted in the queue's depth and age: the alert sees it
    finally:
        _cleanup(control, tenant)
        _cleanup(control, failed)


def test_a_worker_that_cannot_provision_records_why_once_instead_of_retrying_every_poll(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    registry = _queued(control, tenant)
    builds: list[str] = []

    def missing(_worker: ProvisioningWorker) -> Provisioner:
        builds.append(tenant)
        required(None, "stack.dir")
        raise AssertionError("unreachable")

    worker = ProvisioningWorker(settings, control, missing, scope=lambda t: t == tenant)
    try:
        assert worker.poll() == 1
        worker.wait(30)
        record = registry.get(tenant)
        assert record is not None and record.error == (
            "worker: settings: stack.dir is unset; set METALAKE_STACK__DIR (the local stack's tooling sets it for a"
            " checkout)"
        )
        assert record.state is TenantState.PROVISIONING and record.queued_at is not None  # the alert still sees it
        assert worker.poll() == 0 and builds == [tenant]  # left to an operator, not run again every poll
    finally:
        _cleanup(control, tenant)


class SubprocessStep:
    """A step whose first run starts a subprocess that outlives any test (as ``lake init`` starts a JVM)."""

    name = "subprocess"

    def __init__(self) -> None:
        self.runs = 0

    def applies(self, tenant: TenantRecord) -> bool:
        return True

    def provision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        self.runs += 1
        if self.runs == 1:
            ctx.run([sys.executable, "-c", "import time; time.sleep(600)", "init"])

    def deprovision(self, ctx: StepContext, tenant: TenantRecord, names: TenantNames) -> None:
        return None


def test_a_stopping_worker_leaves_the_tenant_queued_for_the_next(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    registry = _queued(control, tenant)
    step = SubprocessStep()

    def make(worker: ProvisioningWorker) -> Provisioner:
        # The worker's own runner: the step's process group dies with the worker's stop.
        run: Callable[[Any], tuple[int, str]] = lambda argv: run_step_child(argv, 600.0, worker.stop)  # noqa: E731
        context = StepContext(worker.settings, control, LocalProcessLauncher(worker.settings), run)
        return Provisioner(registry, context, (step,))

    first = ProvisioningWorker(settings, control, make, scope=lambda t: t == tenant)
    try:
        assert first.poll() == 1
        wait_for("the step's subprocess", lambda: step.runs == 1, timeout_s=30)
        started = time.monotonic()
        first.stop.set()
        first.wait(30)
        assert time.monotonic() - started < 10  # the child was killed, not waited for
        record = registry.get(tenant)
        assert record is not None and record.state is TenantState.PROVISIONING
        assert (record.error, first.ran) == (None, [])  # nothing recorded: not a failure
        assert record.queued_at is not None
        assert LeaseStore(control[CONTROL_DATABASE][LEASES]).holder(tenant_key(tenant)) is None

        second = ProvisioningWorker(settings, control, make, scope=lambda t: t == tenant)
        assert second.poll() == 1
        second.wait(30)
        done = registry.get(tenant)
        assert done is not None and done.state is TenantState.ACTIVE and step.runs == 2
    finally:
        _cleanup(control, tenant)


def test_queued_work_is_finished_with_the_real_steps_without_any_request(
    settings: Settings, control: Mongo, tenant: str
) -> None:
    """The worker provisions a tenant queued in ``provisioning`` and finishes deleting one queued in ``deleting``
    (documents from before ``queued_at`` too: queued by their state)."""
    gone = f"{tenant}-d"
    _queued(control, gone, TenantState.DELETING)
    control[CONTROL_DATABASE][TENANTS_COLLECTION].update_one({"_id": gone}, {"$unset": {"queued_at": ""}})
    registry = _queued(control, tenant)
    names = names_for(tenant, settings.lake_root)
    with provisioning_worker(settings, control, lambda t: t in (tenant, gone)):
        try:

            def state() -> TenantState | None:
                record = registry.get(tenant)
                return record.state if record is not None else None

            wait_for("the queued tenant active", lambda: state() is TenantState.ACTIVE, timeout_s=600)
            wait_for("the queued deletion done", lambda: registry.get(gone) is None, timeout_s=600)
            assert names.lake_dir.exists()
        finally:
            registry.set_state(tenant, TenantState.DELETING)
            wait_for("the tenant deleted", lambda: registry.get(tenant) is None, timeout_s=600)
            _cleanup(control, gone)
            _cleanup(control, tenant)
    assert not names.lake_dir.exists()
