"""The admin API's background work, each item run under a lease (``metalake.lease``) so that of several API replicas
one runs it, whether a request scheduled it or the resumer (``api.services.provisioning.resume``) picked it up after a
crash: a tenant's provisioning or deprovisioning. (Erasures are not the API's: it queues them, ``control.erasures``,
and the lake worker runs them.)

Lease key: ``tenant:<id>`` for the tenant's lifecycle (provisioning and deprovisioning share it, so a deletion waits
for a provisioning run to stop; not ``<id>/...``, which ``ControlPlaneStep`` deletes while deprovisioning holds it).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager

from api.context import ApiContext
from api.services import audit
from api.services.provisioning.launcher import launcher_for
from api.services.provisioning.provisioner import Outcome, Provisioner
from api.services.provisioning.steps import StepContext
from control.auth.principal import Principal
from metalake.lease import LeaseHeld, LeaseStore
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry

log = logging.getLogger(__name__)

# Who the audit names for work the resumer picked up.
RESUMER = Principal(subject="metalake-api:resume", tenant=None, scopes=frozenset())

_POLL_S = 0.5


def tenant_key(tenant: str) -> str:
    return f"tenant:{tenant}"


def lease_store(ctx: ApiContext) -> LeaseStore:
    return LeaseStore.in_database(ctx.mongo[CONTROL_DATABASE])


@contextmanager
def leased(ctx: ApiContext, key: str, wait_s: float) -> Iterator[bool]:
    """Hold ``key`` for the block (renewed in the background); yields ``False`` if another live holder kept it for
    ``wait_s`` (it is running the same item, or the resumer will pick the item up once it is free)."""
    store, ttl_s = lease_store(ctx), ctx.settings.api.lease_ttl_s
    deadline = time.monotonic() + wait_s
    with ExitStack() as stack:
        while True:
            try:
                stack.enter_context(store.held(key, ttl_s))
                break
            except LeaseHeld:
                if time.monotonic() >= deadline:
                    log.info("api.lease_busy", extra={"lease": key})
                    yield False
                    return
                time.sleep(_POLL_S)
        yield True


def build_provisioner(ctx: ApiContext) -> Provisioner:
    context = StepContext(settings=ctx.settings, mongo=ctx.mongo, launcher=launcher_for(ctx.settings))
    return Provisioner(TenantRegistry(ctx.mongo[CONTROL_DATABASE]), context)


def _tenant_run(  # noqa: PLR0913
    ctx: ApiContext,
    principal: Principal,
    tenant: str,
    wait_s: float,
    action: str,
    run: Callable[[str], Outcome],
    *,
    tenant_audit: bool,
) -> Outcome | None:
    """``run`` the tenant's lifecycle work under its lease, then the audit rows; ``None`` if the lease was not had."""
    with leased(ctx, tenant_key(tenant), wait_s) as held:
        if not held:
            return None
        outcome = run(tenant)
    result = audit.DONE if outcome.ok else audit.FAILED
    counts = {"steps": len(outcome.ran), "ms": int(outcome.seconds * 1000)}
    audit.record_platform(ctx, principal, action, tenant, result, counts=counts)
    if tenant_audit and TenantRegistry(ctx.mongo[CONTROL_DATABASE]).get(tenant) is not None:
        audit.record(ctx, tenant, principal, action, tenant, result, counts=counts)
    return outcome


def provision_tenant(
    ctx: ApiContext, prov: Provisioner, principal: Principal, tenant: str, wait_s: float
) -> Outcome | None:
    """Run the tenant's pending provisioning steps under its lease, with the audit rows; ``None`` if not run."""
    return _tenant_run(ctx, principal, tenant, wait_s, "tenant.provision", prov.provision, tenant_audit=True)


def deprovision_tenant(
    ctx: ApiContext, prov: Provisioner, principal: Principal, tenant: str, wait_s: float
) -> Outcome | None:
    """Deprovision the tenant (state ``deleting``) under its lease, with the platform audit row (its own table goes)."""
    audit.flush(ctx)  # rows buffered for the tenant land before its folder goes, never after (recreating it)
    return _tenant_run(ctx, principal, tenant, wait_s, "tenant.deprovision", prov.deprovision, tenant_audit=False)
