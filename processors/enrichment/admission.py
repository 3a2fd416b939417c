"""Which tenants' events the job drops: those of tenants being deleted or deleted.

The edge (write keys, tokens, webhooks) refuses suspended and deleting tenants, but events it accepted before sit in
Kafka, and a lagging job would write them after the deletion dropped the tenant's tables and databases: the tenant's
data would come back. So every micro-batch asks the control plane once (``TenantRegistry.refused_for_events``: the
batch's tenants in state ``deleting`` or with a deletion tombstone) and the writers leave those tenants' records out,
counted in ``metalake.enrichment.dropped`` (``reason=tenant-deleted``) instead of written or dead-lettered (a dead
letter would recreate the tenant's ``_dlq`` too).

Events of a *suspended* tenant are processed: they were accepted while it was active, suspension is reversible and
refuses new input and access, not data the tenant sent before.

When the control plane cannot be read, the last answer is used for the tenants it covered and other tenants' events
are written: the lake must not stall because MongoDB blinked (the edge refuses new events of those tenants anyway).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from typing import Any

from opentelemetry import metrics
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry

log = logging.getLogger(__name__)
meter = metrics.get_meter(__name__)
dropped_records = meter.create_counter(
    "metalake.enrichment.dropped", description="Records left out because their tenant is being deleted or deleted"
)

DROP_REASON = "tenant-deleted"

# The batch's tenants -> those whose events are dropped.
Lookup = Callable[[frozenset[str]], set[str]]


class TenantAdmission:
    """One control-plane lookup per micro-batch, shared by the job's queries (thread-safe)."""

    def __init__(self, lookup: Lookup) -> None:
        self._lookup = lookup
        self._lock = threading.Lock()
        # The last answer for each tenant looked up (True: dropped), the fallback when the lookup fails.
        self._known: dict[str, bool] = {}

    @classmethod
    def connect(cls, mongo: MongoClient[dict[str, Any]]) -> TenantAdmission:
        registry = TenantRegistry(mongo[CONTROL_DATABASE])
        return cls(registry.refused_for_events)

    def refused(self, tenants: Iterable[str]) -> frozenset[str]:
        """The tenants among ``tenants`` whose events this batch must drop."""
        wanted = frozenset(tenants)
        if not wanted:
            return frozenset()
        try:
            refused = frozenset(self._lookup(wanted)) & wanted
        except PyMongoError as exc:
            with self._lock:
                stale = frozenset(t for t in wanted if self._known.get(t, False))
            log.warning("enrichment.admission_unavailable", extra={"error": type(exc).__name__, "dropped": len(stale)})
            return stale
        with self._lock:
            self._known.update((t, t in refused) for t in wanted)
        return refused


def count_dropped(counts: dict[str, int], query: str) -> None:
    """Count and log the records a batch dropped, per tenant."""
    for tenant, count in sorted(counts.items()):
        if count:
            dropped_records.add(count, {"reason": DROP_REASON})  # the tenant is in the log line, not a label
            log.warning(
                "enrichment.dropped", extra={"query": query, "tenant": tenant, "count": count, "reason": DROP_REASON}
            )
