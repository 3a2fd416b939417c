"""Seen webhook deliveries (MongoDB ``metalake_control.webhook_deliveries``), so a redelivery publishes nothing.

A delivery is recorded only after Kafka confirmed what it produced: a crash or a 503 before that leaves it unseen,
and the sender's resend publishes it then (at least once; exactly once unless two copies race inside that window).
No TTL index (FerretDB has none): :meth:`DeliveryLog.prune` is called by our own maintenance.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

COLLECTION = "webhook_deliveries"


def delivery_id(tenant: str, connector: str, dedup_key: str) -> str:
    # The key comes from the sender's payload: hashing bounds its length and keeps its content out of the store.
    digest = hashlib.sha256(dedup_key.encode()).hexdigest()
    return f"{tenant}/{connector}/{digest}"


class DeliveryLog:
    """Which deliveries of which connector were already handled (unique ``_id`` per tenant, connector and key)."""

    def __init__(self, database: Database[dict[str, Any]]) -> None:
        self._deliveries: Collection[dict[str, Any]] = database[COLLECTION]

    def seen(self, tenant: str, connector: str, dedup_key: str) -> bool:
        return self._deliveries.find_one({"_id": delivery_id(tenant, connector, dedup_key)}, {"_id": 1}) is not None

    def record(self, tenant: str, connector: str, dedup_key: str, outcome: str, event_ids: Sequence[str]) -> bool:
        """Remember a handled delivery; ``False`` if it was already there (a concurrent copy won the race)."""
        try:
            self._deliveries.insert_one(
                {
                    "_id": delivery_id(tenant, connector, dedup_key),
                    "tenant": tenant,
                    "connector": connector,
                    "outcome": outcome,
                    "event_ids": list(event_ids),
                    "recorded_at": datetime.now(UTC),
                }
            )
        except DuplicateKeyError:
            return False
        return True

    def prune(self, before: datetime) -> int:
        """Forget deliveries recorded before ``before``; return how many."""
        return self._deliveries.delete_many({"recorded_at": {"$lt": before}}).deleted_count
