"""The propagation processor: committed changes in, propagated tags out, offsets committed last.

Consumes ``metalake.changes`` (its own consumer group). Per tenant it keeps a :class:`TenantPropagation`, loaded from
MongoDB the first time the tenant shows up (and every origin reconciled then, so a tag committed while the processor
was away is propagated too), then kept current from the changes. A GDPR erase deletes rows behind its back, so on its
``io.metalake.asset.erased.v1`` the tenant is dropped, then loaded and reconciled again from MongoDB (already
scrubbed). A batch's affected origins are recomputed; their propagated/unpropagated events go to the tenant's priority
topic (confirmed by Kafka), then one completed event per run to ``metalake.changes``; only then are the offsets
committed. A crash in between replays the batch after a restart: the recompute finds the same rows with the same
versions and ids, so stores and consumers see no change.

Several instances share the work: ``metalake.changes`` is keyed by tenant, so a tenant's records all sit on one
partition and its graph lives in the one instance that owns that partition. The processor remembers which
partition each tenant's records came from; when the assignment changes (:meth:`retain`), it drops every tenant
whose partition it no longer owns (or whose partition it never saw): another instance may change that tenant
meanwhile, and if the partition comes back the tenant is reloaded from MongoDB, current, at its next record.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field

from catalog.changes import STATE_CHANGED, InvalidChange, StateChange, change_type, decode_change
from catalog.propagation.model import AssignmentKey
from catalog.propagation.tenant import CLASSIFICATIONS, TenantPropagation
from metalake.events import CloudEvent
from metalake.kafka import EventPublisher, Received
from metalake.telemetry.propagation import batch_span
from processors.propagation.erasure import erased_tenant
from processors.propagation.events import completed_event, tag_event
from tenants.naming import CHANGES_TOPIC

log = logging.getLogger(__name__)

# Called once a batch's events are confirmed and before its offsets are committed (fault tests pause there).
AfterPublishHook = Callable[[int], None]


def read_change(msg: Received) -> StateChange | None:
    """The state change a record carries; None for anything else on the topic (e.g. completed events, ours
    included: the loop guard at the record level)."""
    if change_type(msg.headers()) != STATE_CHANGED:
        return None
    try:
        return decode_change(msg.key(), msg.value(), msg.headers()).state_change
    except InvalidChange as exc:
        # Written by our own job against its schema; a record we cannot read is logged (never its payload) and
        # skipped rather than blocking every tenant behind it.
        log.warning(
            "propagation.unreadable_change",
            extra={"partition": msg.partition(), "offset": msg.offset(), "reason": exc.reason},
        )
        return None


@dataclass
class BatchOutcome:
    records: int = 0
    changes: int = 0
    runs: int = 0
    added: int = 0
    removed: int = 0
    events: list[CloudEvent] = field(default_factory=list)
    completed: list[CloudEvent] = field(default_factory=list)


class PropagationProcessor:
    """The batch handler of the consumer loop (:meth:`handle`), holding every tenant's state in memory."""

    def __init__(
        self,
        load: Callable[[str], TenantPropagation],
        producer: EventPublisher,
        priority_topic: Callable[[str], str],
        *,
        tenants: Collection[str] | None = None,
        after_publish: AfterPublishHook | None = None,
    ) -> None:
        self._load = load
        self._producer = producer
        self._priority_topic = priority_topic
        self._tenants = frozenset(tenants) if tenants else None
        self._after_publish = after_publish
        self._states: dict[str, TenantPropagation] = {}
        # tenant -> the partitions of metalake.changes its records came from (one, unless records predate the
        # tenant key): the tenant is held only while all of them are owned.
        self._partitions: dict[str, set[int]] = {}
        self._batches = 0

    def state(self, tenant: str) -> TenantPropagation | None:
        return self._states.get(tenant)

    def bootstrap(self, tenant: str) -> tuple[TenantPropagation, set[AssignmentKey]]:
        """Load the tenant from MongoDB (once); return its state and the origins to reconcile."""
        held = self._states.get(tenant)
        if held is not None:
            return held, set()
        started = time.monotonic()
        state = self._load(tenant)
        self._states[tenant] = state
        log.info(
            "propagation.tenant_loaded",
            extra={
                "tenant_id": tenant,
                "edges": len(state.graph),
                "assignments": len(state.assignments),
                "propagated": len(state.rows),
                "seconds": round(time.monotonic() - started, 3),
            },
        )
        return state, state.origins()

    def __call__(self, messages: Sequence[Received]) -> None:
        """The ``BatchConsumer`` handler: returns once every event of the batch is confirmed by Kafka."""
        self.handle(messages)

    def _follows(self, tenant: str) -> bool:
        return self._tenants is None or tenant in self._tenants

    def retain(self, owned: Collection[int]) -> None:
        """The partitions of ``metalake.changes`` this instance owns now: drop every tenant held from another one
        (or loaded before any record of it, at the start-up reconcile). Called by the consumer on every assignment
        change, between batches."""
        keep = set(owned)
        for tenant in sorted(set(self._states) | set(self._partitions)):
            seen = self._partitions.get(tenant)
            if seen and seen <= keep:
                continue
            self._partitions.pop(tenant, None)
            if self._states.pop(tenant, None) is not None:
                log.info("propagation.tenant_forgotten", extra={"tenant_id": tenant, "reason": "partition_not_owned"})

    def _seen(self, tenant: str, msg: Received) -> None:
        partition = msg.partition()
        if partition is not None:
            self._partitions.setdefault(tenant, set()).add(partition)

    def handle(self, messages: Sequence[Received]) -> BatchOutcome:
        with batch_span("propagation.batch", (m.headers() for m in messages)):
            return self._handle(messages)

    def _handle(self, messages: Sequence[Received]) -> BatchOutcome:
        outcome = BatchOutcome(records=len(messages))
        by_tenant: dict[str, list[StateChange]] = {}
        for msg in messages:
            erased = erased_tenant(msg)
            if erased is not None and self._follows(erased):
                self._seen(erased, msg)
                self.forget(erased)
                # The reload reads MongoDB after every change before the erase was committed there: those changes
                # are in it (or were erased), and replaying them could bring the erased asset back into memory.
                by_tenant[erased] = []
                continue
            change = read_change(msg)
            if change is None or not self._follows(change.tenant):
                continue
            self._seen(change.tenant, msg)
            by_tenant.setdefault(change.tenant, []).append(change)
        for tenant in sorted(by_tenant):
            # A tenant just forgotten is reloaded and reconciled here, even without a change of its own: a tag that
            # also reaches an asset by a path that avoided the erased one gets that path back now.
            self._run_tenant(tenant, by_tenant[tenant], outcome)
        self.publish(outcome)
        return outcome

    def forget(self, tenant: str) -> None:
        """Drop what is held of ``tenant`` (an asset of it was erased): the next run reloads it from MongoDB."""
        if self._states.pop(tenant, None) is not None:
            log.info("propagation.tenant_forgotten", extra={"tenant_id": tenant, "reason": "asset_erased"})

    def reconcile(self, tenant: str) -> BatchOutcome:
        """Load the tenant (if not yet) and publish what its origins should reach but do not (startup)."""
        outcome = BatchOutcome()
        self._run_tenant(tenant, [], outcome)
        self.publish(outcome)
        return outcome

    def _run_tenant(self, tenant: str, changes: list[StateChange], outcome: BatchOutcome) -> None:
        state, affected = self.bootstrap(tenant)
        own: set[AssignmentKey] = set()
        for change in changes:
            hit = state.apply(change.table, change.row)
            affected |= hit
            if change.table == CLASSIFICATIONS:
                own |= hit
        outcome.changes += len(changes)
        for origin in sorted(affected):
            plan = state.plan(origin)
            outcome.runs += 1
            if not plan.changed and origin not in own:
                continue
            outcome.added += len(plan.added)
            outcome.removed += len(plan.removed)
            outcome.events.extend(tag_event(tenant, row) for row in (*plan.added, *plan.removed))
            assignment = state.assignments.get(origin)
            outcome.completed.append(completed_event(plan, assignment.stamp[0] if assignment else 0))
            if plan.truncated:
                log.warning(
                    "propagation.truncated",
                    extra={"tenant_id": tenant, "tag": plan.tag, "reason": plan.reason, "reached": plan.reached},
                )

    def publish(self, outcome: BatchOutcome) -> None:
        """Tags first (into each tenant's priority topic), then the completed events: a consumer that reads
        "completed" can already count on the tags being in Kafka."""
        if outcome.events:
            self._producer.publish(outcome.events, lambda e: self._priority_topic(e.tenantid))
        if outcome.completed:
            self._producer.publish(outcome.completed, lambda e: CHANGES_TOPIC)
        self._batches += 1
        if outcome.events or outcome.completed:
            log.info(
                "propagation.published",
                extra={
                    "records": outcome.records,
                    "changes": outcome.changes,
                    "runs": outcome.runs,
                    "added": outcome.added,
                    "removed": outcome.removed,
                    "completed": len(outcome.completed),
                },
            )
            if self._after_publish is not None:
                self._after_publish(self._batches)
