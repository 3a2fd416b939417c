"""Resuming the background work a crashed or restarted API left unfinished: tenants stuck in ``provisioning`` or
``deleting``. (Erasures are not the API's work: the lake worker claims them from their queue, ``control.erasures``.)
Runs in a thread started by the app's lifespan (startup is not delayed): one sweep at once, then one every
``api.resume_interval_s``, so a replica also takes over the work of a peer that died while it keeps running.

An item is picked up when nobody holds its lease and either its lease expired (its runner died) or it has not
changed for ``api.resume_grace_s`` (its request's own run never started); a tenant whose last run failed (``error``
set) is not: it waits for ``POST .../provision`` or another ``DELETE``, like before, unless the failure was a step
waiting on another component (``provisioner.waiting``: the shared tables the streaming job registers at start),
retried every ``api.resume_grace_s`` (the failure stamps the tenant's ``updated_at``). The item then runs through
``api.services.provisioning.runs``, under the same lease as a run a request scheduled, so two never overlap. Each
sweep also backfills the tag documents of tenants provisioned before ``urn_keys`` existed (``catalog.urn_keys``).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from api.context import ApiContext
from api.services.provisioning.provisioner import Provisioner, waiting
from api.services.provisioning.runs import (
    RESUMER,
    build_provisioner,
    deprovision_tenant,
    lease_store,
    provision_tenant,
    tenant_key,
)
from catalog import urn_keys
from tenants.naming import CONTROL_DATABASE, names_for
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

    def sweep(self) -> None:
        """Run every item nobody is running, one after the other."""
        self._tenants()
        self._projections()

    def _projections(self) -> None:
        """Backfill the ``urn_keys`` of the tag documents of every active or suspended tenant still without them
        (``catalog.urn_keys``: an upgrade from before the field). Idempotent; once done, one read per tenant."""
        for record in TenantRegistry(self.ctx.mongo[CONTROL_DATABASE]).list():
            if record.state in (TenantState.ACTIVE, TenantState.SUSPENDED) and self.scope(record.id):
                database = self.ctx.mongo[names_for(record.id, self.ctx.settings.lake_root).mongo_database]
                if not urn_keys.ready(database):
                    urn_keys.backfill(database)

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

    def run(self, stop: threading.Event) -> None:
        """Sweep at once, then every ``resume_interval_s`` until ``stop``; a failed sweep is retried at the next."""
        while not stop.is_set():
            try:
                self.sweep()
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
