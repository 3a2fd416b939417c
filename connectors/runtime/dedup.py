"""Seen webhook deliveries (MongoDB ``metalake_control.webhook_deliveries``), so a redelivery publishes nothing.

A delivery is recorded only after Kafka confirmed what it produced: a crash or a 503 before that leaves it unseen,
and the sender's resend publishes it then (at least once; exactly once unless two copies race inside that window).

Expiry, as the outbound delivery ledger does it (``metalake.expiry``): each record carries ``expires_at`` = recorded
+ ``retention`` (``connect.webhook_delivery_retention_s``); MongoDB deletes expired records through a TTL index
(:meth:`DeliveryLog.ensure_expiry`), and where the server has none (FerretDB 1.x) the worker calls
:meth:`DeliveryLog.prune` on a timer. A resend after the retention is published again: the retention must outlive the
senders' retries and the life of a captured delivery. Monte Carlo signs no timestamp, so a delivery cannot be refused
for its age: a captured "opened" replayed once its record was gone reopened a resolved incident. So records are kept
400 days by default, and kept small for that (a hash, the outcome, how many events: not the events' ids).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict

from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from metalake.expiry import delete_in_batches, ensure_ttl_index, expires_at
from metalake.mongo import typed_collection

COLLECTION = "webhook_deliveries"
DEFAULT_RETENTION = timedelta(days=400)


class DeliveryDoc(TypedDict):
    """A document of ``webhook_deliveries``: one handled delivery and the events it published."""

    _id: str
    tenant: str
    connector: str
    outcome: str
    # How many events it published (records written before issue 21 hold their ids, ``event_ids``, instead).
    events: int
    recorded_at: datetime
    # Absent from records written before expiry existed (see expired_query).
    expires_at: NotRequired[datetime]


def delivery_id(tenant: str, connector: str, dedup_key: str) -> str:
    # The key comes from the sender's payload: hashing bounds its length and keeps its content out of the store.
    digest = hashlib.sha256(dedup_key.encode()).hexdigest()
    return f"{tenant}/{connector}/{digest}"


def expired_query(now: datetime, retention: timedelta) -> dict[str, Any]:
    """The records a pruning pass deletes: past ``expires_at``, and records from before expiry existed (they carry
    no ``expires_at``) once ``recorded_at`` is older than the retention."""
    return {
        "$or": [
            {"expires_at": {"$lte": now}},
            {"expires_at": {"$exists": False}, "recorded_at": {"$lte": now - retention}},
        ]
    }


class DeliveryLog:
    """Which deliveries of which connector were already handled (unique ``_id`` per tenant, connector and key)."""

    def __init__(self, database: Database[dict[str, Any]], retention: timedelta = DEFAULT_RETENTION) -> None:
        self._deliveries: Collection[DeliveryDoc] = typed_collection(database, COLLECTION, DeliveryDoc)
        self.retention = retention

    def seen(self, tenant: str, connector: str, dedup_key: str) -> bool:
        return self._deliveries.find_one({"_id": delivery_id(tenant, connector, dedup_key)}, {"_id": 1}) is not None

    def record(self, tenant: str, connector: str, dedup_key: str, outcome: str, event_ids: Sequence[str]) -> bool:
        """Remember a handled delivery; ``False`` if it was already there (a concurrent copy won the race)."""
        now = datetime.now(UTC)
        try:
            self._deliveries.insert_one(
                {
                    "_id": delivery_id(tenant, connector, dedup_key),
                    "tenant": tenant,
                    "connector": connector,
                    "outcome": outcome,
                    "events": len(event_ids),
                    "recorded_at": now,
                    "expires_at": expires_at(now, self.retention),
                }
            )
        except DuplicateKeyError:
            return False
        return True

    def ensure_expiry(self) -> bool:
        """Create the TTL index on ``expires_at``; ``False`` if the server has none (then :meth:`prune` must run)."""
        return ensure_ttl_index(self._deliveries)

    def prune(self, now: datetime | None = None, batch: int = 500) -> int:
        """Forget expired deliveries (see :func:`expired_query`), ``batch`` at a time; return how many went."""
        return delete_in_batches(self._deliveries, expired_query(now or datetime.now(UTC), self.retention), batch)
