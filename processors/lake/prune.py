"""The recent window of MongoDB: delete the incident documents of resolved incidents last updated more than N days
ago. Delta keeps the full history; ``reconcile`` applies the same window so it does not bring them back. No TTL
index: FerretDB has none, and a TTL could not express "resolved only" anyway. Needs MongoDB only, no Spark: it never
touches Delta, so a tenant's tier does not matter (each tenant has its own projection database either way). Every
tenant is the registry's, the lake's and the shared tables' tenants (``discover``).

    python -m processors.lake prune [--tenant T] [--older-than-days N]
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pymongo import MongoClient

from metalake.mongo import mongo_client
from processors.enrichment.state import INCIDENTS
from processors.lake import window
from processors.lake.discover import connect
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress
from processors.lake.settings import LakeWorkerSettings
from tenants.naming import TenantNames

log = logging.getLogger("processors.lake.prune")  # not __main__ under python -m


def prune(
    mongo: MongoClient[dict[str, Any]],
    tenants: list[TenantNames],
    older_than_days: int = window.DEFAULT_DAYS,
    now: datetime | None = None,
    echo: Callable[[str], None] = progress,
) -> dict[str, int]:
    """Delete the tenant's resolved incidents older than the window; return the count deleted per tenant."""
    before = window.cutoff(now or datetime.now(UTC), older_than_days)
    deleted = {}
    for names in tenants:
        result = mongo[names.mongo_database][INCIDENTS.collection].delete_many(window.prune_filter(before))
        deleted[names.tenant_id] = result.deleted_count
        echo(f"prune {names.tenant_id}: {result.deleted_count} resolved incidents older than {older_than_days} days")
        log.info("lake.pruned", extra={"deleted": result.deleted_count, "older_than_days": older_than_days})
    return deleted


def prune_report(settings: LakeWorkerSettings, tenant: str | None, older_than_days: int) -> dict[str, Any]:
    """The report of ``python -m processors.lake prune`` (``processors.lake.main``): progress on stderr."""
    if older_than_days < 0:
        raise LakeUsageError("--older-than-days must be 0 or more")
    with connect(settings) as directory:
        tenants = directory.selected(tenant)
    mongo = mongo_client(settings)
    try:
        deleted = prune(mongo, tenants, older_than_days)
    finally:
        mongo.close()
    return {"older_than_days": older_than_days, "deleted": deleted, "total": sum(deleted.values())}
