"""The admin API's background work, each item run under a lease (``metalake.lease``) so that of several API replicas
one runs it, whether a request scheduled it or the resumer (``api.services.provisioning.resume``) picked it up after a
crash: a tenant's provisioning or deprovisioning, and an asset erasure.

Lease keys: ``tenant:<id>`` for the tenant's lifecycle (provisioning and deprovisioning share it, so a deletion waits
for a provisioning run to stop; not ``<id>/...``, which ``ControlPlaneStep`` deletes while deprovisioning holds it),
``<tenant>/erasure/<id>`` for an erasure (deleted with the tenant).

An erasure's URN is kept in ``erasures_pending`` (``{_id: "<tenant>/<id>", tenant, urn}``) while the erasure is not
finished, so a crashed one can run again; the status document and the audit keep only its hash. The document goes
when the erasure is done or failed.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from typing import TypedDict

from api.context import ApiContext
from api.services import audit
from api.services.erasures import ErasureState, ErasureStore, run_erasure
from api.services.provisioning.launcher import launcher_for
from api.services.provisioning.provisioner import Outcome, Provisioner
from api.services.provisioning.steps import StepContext
from control.auth.principal import Principal
from metalake.lease import LeaseHeld, LeaseStore
from metalake.mongo import typed_collection
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry

log = logging.getLogger(__name__)

PENDING_ERASURES = "erasures_pending"
# Who the audit names for work the resumer picked up (a tenant's runs; an erasure keeps its requester).
RESUMER = Principal(subject="metalake-api:resume", tenant=None, scopes=frozenset())

_POLL_S = 0.5


def tenant_key(tenant: str) -> str:
    return f"tenant:{tenant}"


def erasure_key(tenant: str, erasure_id: str) -> str:
    return f"{tenant}/erasure/{erasure_id}"


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


def _tenant_run(
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
    return _tenant_run(ctx, principal, tenant, wait_s, "tenant.deprovision", prov.deprovision, tenant_audit=False)


class PendingErasureDoc(TypedDict):
    """A document of ``erasures_pending``: the URN of an unfinished erasure."""

    _id: str  # "<tenant>/<erasure id>", as the erasure's status document
    tenant: str
    urn: str


class PendingErasures:
    """The URNs of unfinished erasures (see the module docstring). Single-document operations by ``_id``."""

    def __init__(self, ctx: ApiContext) -> None:
        self._pending = typed_collection(ctx.mongo[CONTROL_DATABASE], PENDING_ERASURES, PendingErasureDoc)

    def put(self, tenant: str, erasure_id: str, urn: str) -> None:
        # The replacement leaves out _id: the upsert takes it from the filter.
        self._pending.replace_one({"_id": f"{tenant}/{erasure_id}"}, {"tenant": tenant, "urn": urn}, upsert=True)

    def urn(self, tenant: str, erasure_id: str) -> str | None:
        doc = self._pending.find_one({"_id": f"{tenant}/{erasure_id}"})
        return doc["urn"] if doc is not None else None

    def drop(self, tenant: str, erasure_id: str) -> None:
        self._pending.delete_one({"_id": f"{tenant}/{erasure_id}"})

    def all(self) -> list[tuple[str, str]]:
        """Every unfinished erasure as ``(tenant, id)``: a scan, of a collection that holds only unfinished ones."""
        return [(d["tenant"], d["_id"].split("/", 1)[1]) for d in self._pending.find({}, {"tenant": 1})]


def erase_asset(
    ctx: ApiContext,
    principal: Principal,
    tenant: str,
    erasure_id: str,
    urn: str,
    children: bool,
    wait_s: float,
) -> bool:
    """Run an erasure under its lease and record how it ended (status document, audit); ``False`` if not run."""
    store = ErasureStore(ctx.mongo[CONTROL_DATABASE])
    with leased(ctx, erasure_key(tenant, erasure_id), wait_s) as held:
        if not held:
            return False
        current = store.get(tenant, erasure_id)
        if current is None or current.state in (ErasureState.DONE, ErasureState.FAILED):
            PendingErasures(ctx).drop(tenant, erasure_id)  # finished by another run meanwhile (or the tenant went)
            return False
        try:
            record = run_erasure(store, tenant, erasure_id, urn, principal.subject, children)
        except Exception as exc:  # noqa: BLE001 - reported on the status resource and in the audit trail
            # After the answer nobody sees the exception: the status resource and the audit trail must say it.
            log.warning(
                "api.erasure_error", extra={"tenant": tenant, "erasure": erasure_id, "error": type(exc).__name__}
            )
            record = store.update(
                tenant, erasure_id, ErasureState.FAILED, error=f"internal error: {type(exc).__name__}"
            )
        PendingErasures(ctx).drop(tenant, erasure_id)
    result = audit.DONE if record is not None and record.state is ErasureState.DONE else audit.FAILED
    audit.record(ctx, tenant, principal, "erasure.finish", urn, result, counts=dict(record.counts) if record else None)
    return True
