"""The provisioning queue: tenant (de)provisioning the admin API queued and the lake worker runs
(``processors.lake.provisioning``), like the erasure queue (``control.erasures``), so the API starts no subprocess and
needs no Spark, Kafka admin, lake file system or Trino admin connection for it.

The queue is the ``tenants`` collection itself: a tenant with ``queued_at`` set (``POST /v1/tenants``, ``POST
.../provision``, ``DELETE``), or in state ``provisioning`` or ``deleting`` (a document from before the field), is
queued work; its state says which (``deleting``: deprovision, else provision the steps not yet recorded). A run that
failed (a step, or the worker itself: ``worker: <why>``) records its error on the tenant and leaves the queue until
``POST .../provision`` or another ``DELETE`` queues it again, unless the error is a step waiting on another component
(``provisioner.waiting``), retried every ``provisioning.waiting_retry_s``. The database selects the queued tenants
(``TenantRegistry.queued``): a poll reads the queue, not every tenant's record.

A worker runs a tenant under the lease ``tenant:<id>`` (provisioning and deprovisioning share it, so a deletion waits
for a provisioning run to stop; not ``<id>/...``, which ``ControlPlaneStep`` deletes while deprovisioning holds it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from pymongo.database import Database

from control.provisioning.provisioner import waiting
from metalake.mongo import Doc
from tenants.registry import TenantRecord, TenantRegistry, TenantState

_WORK_STATES = (TenantState.PROVISIONING, TenantState.DELETING)


def tenant_key(tenant: str) -> str:
    """The lease a worker holds while it (de)provisions the tenant."""
    return f"tenant:{tenant}"


def _utc(at: datetime) -> datetime:
    return at if at.tzinfo is not None else at.replace(tzinfo=UTC)  # pymongo's naive UTC


def queued(record: TenantRecord) -> bool:
    """Whether the tenant has (de)provisioning work queued or failed."""
    return record.queued_at is not None or record.state in _WORK_STATES


def queued_since(record: TenantRecord) -> datetime:
    """When the tenant's work was queued (a document from before ``queued_at``: its last change)."""
    return _utc(record.queued_at or record.updated_at)


def due(record: TenantRecord, now: datetime, waiting_retry_s: float) -> bool:
    """Whether a worker should run the tenant now: queued, and not failed (a waiting step: not retried too soon)."""
    if not queued(record):
        return False
    if record.error is None:
        return True
    return waiting(record.error) and _utc(record.updated_at) + timedelta(seconds=waiting_retry_s) <= now


@dataclass(frozen=True)
class ProvisioningQueue:
    """The read side of the queue: what is due, how deep it is, how old its oldest item is."""

    control: Database[Doc]

    def all(self) -> list[TenantRecord]:
        return [r for r in TenantRegistry(self.control).queued() if queued(r)]

    def due(self, now: datetime, waiting_retry_s: float) -> list[TenantRecord]:
        """The tenants to run, oldest queued first."""
        return sorted((r for r in self.all() if due(r, now, waiting_retry_s)), key=lambda r: (queued_since(r), r.id))

    def depth(self) -> int:
        """Tenants whose queued work is not done (failed ones included: they wait for an operator)."""
        return len(self.all())

    def oldest(self, now: datetime) -> float:
        """Seconds since the oldest queued work was queued; 0 when none is."""
        return oldest_seconds(self.all(), now)


def oldest_seconds(records: Sequence[TenantRecord], now: datetime) -> float:
    """Seconds since the oldest of ``records`` was queued; 0 for none."""
    return max((max(0.0, (now - queued_since(r)).total_seconds()) for r in records), default=0.0)
