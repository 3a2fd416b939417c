"""Runs a tenant's provisioning steps in order (in the lake worker, ``processors.lake.provisioning``), recording each
one done in the tenant document, so a run that crashed resumes with the first step not recorded (every step is
idempotent, so one that ran but was not recorded simply runs again). Deprovisioning runs every step backwards regardless
of the record, then deletes the document.

A failed run records its error on the tenant and waits for ``POST .../provision``; a step that waits on another
component (``StepWaiting``) records an error marked as such (:func:`waiting`), which the worker retries by itself; a run
whose worker stops (``StepInterrupted``) records nothing, so the next claim runs it again.
"""

from __future__ import annotations

import logging
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from control.provisioning.steps import STEPS, Step, StepContext, StepFailed, StepInterrupted, StepWaiting
from metalake.telemetry.metrics import PROVISIONING_STEP
from tenants.registry import TenantRecord, TenantRegistry, TenantState
from tenants.trino_schemas import trino_schema

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Outcome:
    tenant: str
    ok: bool
    ran: tuple[str, ...]
    error: str | None = None
    seconds: float = 0.0
    # The worker stopped mid-step: nothing recorded, the next claim runs the step again.
    interrupted: bool = False


_WAITING = re.compile(r"step [a-z_]+ waiting: ")


def _error(step: Step, exc: Exception) -> str:
    # Only our own messages are shown whole; anything else is named by its type (it may quote a config value).
    detail = str(exc) if isinstance(exc, StepFailed) else type(exc).__name__
    return f"step {step.name} waiting: {detail}" if isinstance(exc, StepWaiting) else f"step {step.name}: {detail}"


def waiting(error: str | None) -> bool:
    """Whether a tenant's recorded error is a step waiting on another component (retried without being asked)."""
    return error is not None and _WAITING.match(error) is not None


def timed_step(action: str, step: Step, run: Callable[[], None]) -> None:
    """Run one step, its wall time recorded as ``metalake_provisioning_step_seconds{action, step, outcome}``: which
    step grows with the tenant count is what this answers (docs/benchmarks.md, provisioning at scale)."""
    started, outcome = time.monotonic(), "failed"
    try:
        run()
        outcome = "done"
    except StepInterrupted:
        outcome = "interrupted"
        raise
    finally:
        seconds = time.monotonic() - started
        PROVISIONING_STEP.record(seconds, {"action": action, "step": step.name, "outcome": outcome})
        log.debug("tenants.step_done", extra={"action": action, "step": step.name, "seconds": round(seconds, 3)})


def pending(tenant: TenantRecord, steps: Sequence[Step] = STEPS) -> list[str]:
    """The steps the tenant still needs, in order (what ``GET /v1/tenants/{tenant}`` shows as pending)."""
    return [s.name for s in steps if s.applies(tenant) and s.name not in tenant.steps]


class Provisioner:
    def __init__(self, registry: TenantRegistry, context: StepContext, steps: Sequence[Step] = STEPS) -> None:
        self._registry = registry
        self._ctx = context
        self._steps = tuple(steps)

    def trino_schema(self, tenant_id: str) -> str:
        """The tenant's Trino schema, which the ``lake`` step creates (``tenants.trino_schemas``)."""
        return trino_schema(self._ctx.settings, tenant_id)

    def pending(self, tenant: TenantRecord) -> list[str]:
        """The steps the tenant still needs, in order."""
        return pending(tenant, self._steps)

    def provision(self, tenant_id: str) -> Outcome:
        """Run the steps not yet recorded; on success the tenant becomes ``active`` (if it was ``provisioning``)."""
        started = time.monotonic()
        record = self._registry.get(tenant_id)
        if record is None or record.state is TenantState.DELETING:
            return Outcome(tenant_id, False, (), "tenant is gone or being deleted")
        names = record.names(self._ctx.settings.lake_root)
        ran: list[str] = []
        self._registry.set_error(tenant_id, None)
        for step in self._steps:
            if not step.applies(record) or step.name in record.steps:
                continue
            try:
                timed_step("provision", step, partial(step.provision, self._ctx, record, names))
            except StepInterrupted:
                return Outcome(tenant_id, False, tuple(ran), "interrupted", time.monotonic() - started, True)
            except Exception as exc:  # noqa: BLE001 - recorded on the tenant; the next run resumes here
                error = _error(step, exc)
                log.warning("tenants.provision_failed", extra={"tenant": tenant_id, "step": step.name})
                self._registry.set_error(tenant_id, error)
                return Outcome(tenant_id, False, tuple(ran), error, time.monotonic() - started)
            marked = self._registry.mark_step(tenant_id, step.name, done=True)
            if marked is None:
                return Outcome(tenant_id, False, tuple(ran), "tenant deleted while provisioning")
            ran.append(step.name)
            if marked.state is TenantState.DELETING:
                # Stop: the deletion waits for this run's lease, then undoes what the steps made.
                return Outcome(tenant_id, False, tuple(ran), "tenant being deleted", time.monotonic() - started)
        self._registry.set_state(tenant_id, TenantState.ACTIVE, expected=[TenantState.PROVISIONING])
        seconds = time.monotonic() - started
        log.info("tenants.provisioned", extra={"tenant": tenant_id, "steps": ran, "seconds": round(seconds, 3)})
        return Outcome(tenant_id, True, tuple(ran), None, seconds)

    def deprovision(self, tenant_id: str) -> Outcome:
        """Undo every step (last first) and replace the tenant document by a tombstone (the streaming job then drops
        the events of the tenant still in Kafka). The tenant must be in state ``deleting``."""
        started = time.monotonic()
        record = self._registry.get(tenant_id)
        if record is None:
            return Outcome(tenant_id, True, ())
        if record.state is not TenantState.DELETING:
            return Outcome(tenant_id, False, (), "tenant is not being deleted")
        names = record.names(self._ctx.settings.lake_root)
        ran: list[str] = []
        for step in reversed(self._steps):
            if not step.applies(record):
                continue
            try:
                timed_step("deprovision", step, partial(step.deprovision, self._ctx, record, names))
            except StepInterrupted:
                return Outcome(tenant_id, False, tuple(ran), "interrupted", time.monotonic() - started, True)
            except Exception as exc:  # noqa: BLE001 - recorded on the tenant; a retry runs every step again
                error = _error(step, exc)
                log.warning("tenants.deprovision_failed", extra={"tenant": tenant_id, "step": step.name})
                self._registry.set_error(tenant_id, error)
                return Outcome(tenant_id, False, tuple(ran), error, time.monotonic() - started)
            self._registry.mark_step(tenant_id, step.name, done=False)
            ran.append(step.name)
        self._registry.forget(tenant_id)
        seconds = time.monotonic() - started
        log.info("tenants.deprovisioned", extra={"tenant": tenant_id, "steps": ran, "seconds": round(seconds, 3)})
        return Outcome(tenant_id, True, tuple(ran), None, seconds)
