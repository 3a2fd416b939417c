"""Resuming the background work a crashed or restarted API left unfinished: tenants stuck in ``provisioning`` or
``deleting`` and erasures not finished. Runs in a thread started by the app's lifespan (startup is not delayed):
one sweep at once, then one every ``api.resume_interval_s``, so a replica also takes over the work of a peer that
died while it keeps running.

An item is picked up when nobody holds its lease and either its lease expired (its runner died) or it has not
changed for ``api.resume_grace_s`` (its request's own run never started); a tenant whose last run failed (``error``
set) is not: it waits for ``POST .../provision`` or another ``DELETE``, like before, unless the failure was a step
waiting on another component (``provisioner.waiting``: the shared tables the streaming job registers at start),
retried every ``api.resume_grace_s`` (the failure stamps the tenant's ``updated_at``). The item then runs through
``api.services.provisioning.runs``, under the same lease as a run a request scheduled, so two never overlap.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from api.context import ApiContext
from api.services.erasures import ErasureState, ErasureStore
from api.services.provisioning.provisioner import Provisioner, waiting
from api.services.provisioning.runs import (
    RESUMER,
    PendingErasures,
    build_provisioner,
    deprovision_tenant,
    erase_asset,
    erasure_key,
    lease_store,
    provision_tenant,
    tenant_key,
)
from control.auth.principal import Principal
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry, TenantState

log = logging.getLogger(__name__)

Clock = Callable[[], datetime]


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass
class Resumer:
    ctx: ApiContext
    make_provisioner: Callable[[ApiContext], Provisioner] = build_provisioner
    clock: Clock = _utcnow
    # Which tenants this resumer looks after: all of them; tests on the shared stack narrow it to their own.
    scope: Callable[[str], bool] = lambda _tenant: True
    ran: list[str] = field(default_factory=list)  # keys this resumer ran, for logs and tests

    def _free(self, key: str, changed_at: datetime) -> bool:
        """Nobody is running the item: its lease expired, or there is none and the item has been still too long."""
        now = self.clock()
        holder = lease_store(self.ctx).holder(key)
        if holder is not None:
            expires = holder["expires_at"]
            return bool((expires if expires.tzinfo else expires.replace(tzinfo=UTC)) <= now)
        grace = timedelta(seconds=self.ctx.settings.api.resume_grace_s)
        stamp = changed_at if changed_at.tzinfo else changed_at.replace(tzinfo=UTC)
        return stamp + grace <= now

    def sweep(self, *, startup: bool = False) -> None:
        """Run every item nobody is running, one after the other; ``startup`` also settles erasures that cannot run."""
        self._tenants()
        self._erasures()
        if startup:
            self._orphan_erasures()

    def _tenants(self) -> None:
        # The registry holds one small document per tenant: listing it whole is cheap.
        for record in TenantRegistry(self.ctx.mongo[CONTROL_DATABASE]).list():
            if record.state not in (TenantState.PROVISIONING, TenantState.DELETING):
                continue
            if record.error is not None and not waiting(record.error):
                continue
            if not self.scope(record.id):
                continue
            key = tenant_key(record.id)
            if not self._free(key, record.updated_at):
                continue
            log.info("api.resume", extra={"tenant": record.id, "state": record.state.value})
            run = provision_tenant if record.state is TenantState.PROVISIONING else deprovision_tenant
            if run(self.ctx, self.make_provisioner(self.ctx), RESUMER, record.id, 0.0) is not None:
                self.ran.append(key)

    def _erasures(self) -> None:
        pending, store = PendingErasures(self.ctx), ErasureStore(self.ctx.mongo[CONTROL_DATABASE])
        for tenant, erasure_id in pending.all():
            if not self.scope(tenant):
                continue
            record = store.get(tenant, erasure_id)
            if record is None or record.state in (ErasureState.DONE, ErasureState.FAILED):
                pending.drop(tenant, erasure_id)  # finished: the run crashed between its last two writes
                continue
            key = erasure_key(tenant, erasure_id)
            urn = pending.urn(tenant, erasure_id)
            if urn is None or not self._free(key, record.updated_at):
                continue
            log.info("api.resume", extra={"tenant": tenant, "erasure": erasure_id, "state": record.state.value})
            requester = Principal(subject=record.requested_by, tenant=tenant, scopes=frozenset())
            if erase_asset(self.ctx, requester, tenant, erasure_id, urn, record.include_children, 0.0):
                self.ran.append(key)

    def _orphan_erasures(self) -> None:
        """Erasures left unfinished without their URN (accepted before this version, or a crash between the status
        document and the URN's): they cannot run again, so they fail, asking for a new request."""
        pending, store = PendingErasures(self.ctx), ErasureStore(self.ctx.mongo[CONTROL_DATABASE])
        for record in store.unfinished():
            tenant, erasure_id = record.tenant, record.id
            if not self.scope(tenant):
                continue
            key = erasure_key(tenant, erasure_id)
            if pending.urn(tenant, erasure_id) is None and self._free(key, record.updated_at):
                error = "interrupted before it could be resumed: request the erasure again"
                store.update(tenant, erasure_id, ErasureState.FAILED, error=error)
                log.warning("api.erasure_orphaned", extra={"tenant": tenant, "erasure": erasure_id})

    def run(self, stop: threading.Event) -> None:
        """Sweep at once, then every ``resume_interval_s`` until ``stop``; a failed sweep is retried at the next."""
        startup = True
        while not stop.is_set():
            try:
                self.sweep(startup=startup)
                startup = False
            except Exception as exc:  # noqa: BLE001 - MongoDB or a step blinked: the next sweep tries again
                log.warning("api.resume_failed", extra={"error": type(exc).__name__})
            stop.wait(self.ctx.settings.api.resume_interval_s)


def start(ctx: ApiContext) -> Callable[[], None]:
    """Start the resumer thread (unless ``api.resume`` is off); returns what stops it."""
    stop = threading.Event()
    if not ctx.settings.api.resume:
        return stop.set
    thread = threading.Thread(target=Resumer(ctx).run, args=(stop,), name="api-resume", daemon=True)
    thread.start()

    def stop_it() -> None:
        stop.set()
        # An item running now keeps its lease until it ends or the process exits; then its lease expires and a
        # replica (or the next start) takes it over. Do not hold the shutdown for it.
        thread.join(timeout=1.0)

    return stop_it
