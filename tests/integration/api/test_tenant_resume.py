"""Background work the API left unfinished is resumed, once, under a lease in the real control plane (FerretDB):
two runners never run one item, a live holder is left alone, a dead holder's item is taken over, and an API that
starts finds an interrupted provisioning and deletion and finishes them without any request. (Erasures are the lake
worker's: tests/integration/test_erasure_worker.py.)"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from api.services.provisioning.resume import Resumer
from api.services.provisioning.runs import (
    RESUMER,
    build_provisioner,
    leased,
    provision_tenant,
    tenant_key,
)
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from api.context import ApiContext
from control.provisioning.provisioner import Provisioner
from control.provisioning.steps import StepContext, StepWaiting
from metalake.lease import LEASES, LeaseStore
from ops.settings import Settings
from ops.stack.launcher import LocalProcessLauncher
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for
from tenants.registry import TENANTS_COLLECTION, TenantRecord, TenantRegistry, TenantState
from tests._support.itest import wait_for

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
LONG_AGO = datetime.now(UTC) - timedelta(hours=1)


@pytest.fixture
def ctx(settings: Settings, control: Mongo) -> ApiContext:
    return ApiContext(settings=settings, mongo=control)


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


def _interrupted(control: Mongo, tenant: str, state: TenantState = TenantState.PROVISIONING) -> TenantRegistry:
    """A tenant whose run died before it took its lease: registered, untouched for an hour."""
    registry = TenantRegistry(control[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    registry.set_state(tenant, state)
    control[CONTROL_DATABASE][TENANTS_COLLECTION].update_one({"_id": tenant}, {"$set": {"updated_at": LONG_AGO}})
    return registry


def _cleanup(control: Mongo, tenant: str) -> None:
    control[CONTROL_DATABASE][TENANTS_COLLECTION].delete_one({"_id": tenant})
    control[CONTROL_DATABASE][LEASES].delete_one({"_id": tenant_key(tenant)})


def test_a_held_lease_refuses_then_frees(ctx: ApiContext, tenant: str) -> None:
    key = tenant_key(tenant)
    try:
        with leased(ctx, key, 0.0) as first:
            assert first
            with leased(ctx, key, 0.0) as second:  # not re-entrant: a second run of one item waits like any other
                assert not second
            started = time.monotonic()
            with leased(ctx, key, 0.6) as waited:
                assert not waited
            assert time.monotonic() - started >= 0.6

        # A waiting runner gets the lease when the holder finishes.
        release = threading.Event()

        def hold() -> None:
            with leased(ctx, key, 0.0) as held:
                assert held
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        wait_for("the holder", lambda: LeaseStore(ctx.mongo[CONTROL_DATABASE][LEASES]).holder(key) is not None)
        threading.Timer(1.0, release.set).start()
        with leased(ctx, key, 20.0) as after:
            assert after
        holder.join()
        assert LeaseStore(ctx.mongo[CONTROL_DATABASE][LEASES]).holder(key) is None
    finally:
        ctx.mongo[CONTROL_DATABASE][LEASES].delete_one({"_id": key})


def test_two_replicas_run_an_interrupted_tenant_once(settings: Settings, control: Mongo, tenant: str) -> None:
    registry = _interrupted(control, tenant)
    step = SlowStep()
    context = StepContext(settings, control, LocalProcessLauncher(settings))

    def replica() -> Resumer:
        # Each replica has its own client, as two API processes would.
        client: Mongo = MongoClient(settings.mongo_uri, tz_aware=True)
        return Resumer(
            ApiContext(settings, client),
            make_provisioner=lambda _ctx: Provisioner(registry, context, (step,)),
            scope=lambda t: t == tenant,
        )

    replicas = [replica(), replica()]
    try:
        threads = [threading.Thread(target=r.sweep) for r in replicas]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert step.runs == 1
        assert sorted(len(r.ran) for r in replicas) == [0, 1]
        record = registry.get(tenant)
        assert record is not None and record.state is TenantState.ACTIVE and "slow" in record.steps
        assert LeaseStore(control[CONTROL_DATABASE][LEASES]).holder(tenant_key(tenant)) is None  # released
        # Nothing left to resume.
        again = replicas[0]
        again.sweep()
        assert step.runs == 1
    finally:
        for r in replicas:
            r.ctx.mongo.close()
        _cleanup(control, tenant)


def test_a_live_holder_is_left_alone_and_a_dead_ones_work_taken_over(
    settings: Settings, control: Mongo, ctx: ApiContext, tenant: str
) -> None:
    registry = _interrupted(control, tenant)
    step = SlowStep()
    context = StepContext(settings, control, LocalProcessLauncher(settings))
    resumer = Resumer(
        ctx, make_provisioner=lambda _ctx: Provisioner(registry, context, (step,)), scope=lambda t: t == tenant
    )
    leases = control[CONTROL_DATABASE][LEASES]
    key = tenant_key(tenant)
    try:
        # Another replica is running it (its lease is live): not touched, even though the tenant looks old.
        leases.insert_one(
            {"_id": key, "owner": "replica-b:1:live", "expires_at": datetime.now(UTC) + timedelta(seconds=60)}
        )
        resumer.sweep()
        assert (step.runs, resumer.ran) == (0, [])

        # That replica died: its lease expired, so the item is taken over.
        leases.update_one({"_id": key}, {"$set": {"expires_at": datetime.now(UTC) - timedelta(seconds=1)}})
        resumer.sweep()
        assert (step.runs, resumer.ran) == (1, [key])
        record = registry.get(tenant)
        assert record is not None and record.state is TenantState.ACTIVE

        # A tenant whose last run failed (error recorded) waits for an operator instead.
        registry.set_state(tenant, TenantState.PROVISIONING, error="step lake: exit 1")
        control[CONTROL_DATABASE][TENANTS_COLLECTION].update_one({"_id": tenant}, {"$set": {"updated_at": LONG_AGO}})
        resumer.sweep()
        assert resumer.ran == [key]
        # A fresh one (its request's own run is about to start) is left to that run.
        registry.set_state(tenant, TenantState.PROVISIONING)
        resumer.sweep()
        assert resumer.ran == [key]
        # Once it has been still for the grace period, it is picked up.
        control[CONTROL_DATABASE][TENANTS_COLLECTION].update_one({"_id": tenant}, {"$set": {"updated_at": LONG_AGO}})
        resumer.sweep()
        assert resumer.ran == [key, key]
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


def test_a_waiting_step_is_retried_by_the_resumer_and_a_failed_one_is_not(
    settings: Settings, control: Mongo, ctx: ApiContext, tenant: str
) -> None:
    failed = f"{tenant}-f"
    registry = _interrupted(control, tenant)
    _interrupted(control, failed)
    step = WaitsOnce()
    prov = Provisioner(registry, StepContext(settings, control, LocalProcessLauncher(settings)), (step,))
    try:
        first = prov.provision(tenant)
        assert not first.ok and first.error == "step waits waiting: shared tables not registered in Trino yet: events"
        registry.set_error(failed, "step lake: lake init exited with 1")
        for t in (tenant, failed):  # past the grace period
            control[CONTROL_DATABASE][TENANTS_COLLECTION].update_one({"_id": t}, {"$set": {"updated_at": LONG_AGO}})
        resumer = Resumer(ctx, make_provisioner=lambda _ctx: prov, scope=lambda t: t in (tenant, failed))
        resumer.sweep()
        assert resumer.ran == [tenant_key(tenant)]
        record = registry.get(tenant)
        assert record is not None and (record.state, record.error) == (TenantState.ACTIVE, None)
        still = registry.get(failed)
        assert still is not None and still.state is TenantState.PROVISIONING and still.error is not None
    finally:
        _cleanup(control, tenant)
        _cleanup(control, failed)


def test_the_request_path_takes_the_same_lease(
    settings: Settings, control: Mongo, ctx: ApiContext, tenant: str
) -> None:
    """A run scheduled by a request waits for a resumer's run of the same tenant instead of overlapping it."""
    registry = _interrupted(control, tenant)
    step = SlowStep()
    prov = Provisioner(registry, StepContext(settings, control, LocalProcessLauncher(settings)), (step,))
    try:
        with leased(ctx, tenant_key(tenant), 0.0):
            assert provision_tenant(ctx, prov, RESUMER, tenant, 0.3) is None
        assert step.runs == 0
        outcome = provision_tenant(ctx, prov, RESUMER, tenant, 0.3)
        assert outcome is not None and outcome.ok and step.runs == 1
    finally:
        _cleanup(control, tenant)


def test_the_api_resumes_interrupted_work_at_startup(settings: Settings, control: Mongo, tenant: str) -> None:
    """No request: the app's lifespan starts the resumer, which provisions a tenant stuck in ``provisioning`` and
    finishes deleting one stuck in ``deleting``."""
    gone = f"{tenant}-d"
    _interrupted(control, gone, TenantState.DELETING)
    registry = _interrupted(control, tenant)
    fast = settings.model_copy(
        update={"api": settings.api.model_copy(update={"resume": True, "resume_interval_s": 1.0})}
    )
    ctx = ApiContext(fast, control)
    names = names_for(tenant, settings.lake_root)
    try:
        with TestClient(create_app(fast, mongo=control)):

            def state() -> TenantState | None:
                record = registry.get(tenant)
                return record.state if record is not None else None

            wait_for("the interrupted tenant active", lambda: state() is TenantState.ACTIVE, timeout_s=600)
            wait_for("the interrupted deletion done", lambda: registry.get(gone) is None, timeout_s=120)
            assert names.lake_dir.exists()
    finally:
        registry.set_state(tenant, TenantState.DELETING)
        outcome = build_provisioner(ctx).deprovision(tenant)
        assert outcome.ok, outcome
        _cleanup(control, gone)
        _cleanup(control, tenant)
