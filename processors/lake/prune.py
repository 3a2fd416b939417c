"""The recent window of MongoDB: delete the incident documents of resolved incidents last updated more than N days
ago. Delta keeps the full history; ``reconcile`` applies the same window so it does not bring them back. No TTL
index: FerretDB has none, and a TTL could not express "resolved only" anyway. Needs MongoDB only, no Spark: it never
touches Delta, so a tenant's tier does not matter (each tenant has its own projection database either way). Every
tenant is the registry's, the lake's and the shared tables' tenants (``discover``).

    python -m processors.lake.prune [--tenant T] [--older-than-days N]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from pymongo import MongoClient

from metalake.mongo import mongo_client
from metalake.settings import get_settings
from processors.enrichment.state import INCIDENTS
from processors.lake import window
from processors.lake.discover import connect
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress, run
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


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m processors.lake.prune", description=__doc__.split("\n")[0])
    parser.add_argument("--tenant", help="Only this tenant (default: every tenant).")
    parser.add_argument(
        "--older-than-days",
        type=int,
        default=window.DEFAULT_DAYS,
        help=f"Resolved incidents last updated longer ago than this leave MongoDB (default {window.DEFAULT_DAYS}).",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = get_settings()

    def body() -> dict[str, Any]:
        if args.older_than_days < 0:
            raise LakeUsageError("--older-than-days must be 0 or more")
        with connect(settings) as directory:
            tenants = directory.selected(args.tenant)
        mongo = mongo_client(settings)
        try:
            deleted = prune(mongo, tenants, args.older_than_days)
        finally:
            mongo.close()
        return {"older_than_days": args.older_than_days, "deleted": deleted, "total": sum(deleted.values())}

    return run("prune", body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
