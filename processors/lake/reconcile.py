"""Rebuild the MongoDB projection of a tenant from Delta and report the difference (0 on a healthy tenant).

For each state spec: read MongoDB's ``(version, event_id)`` per document, then the Delta table, compare (``diff``),
and unless ``dry_run`` repair: Delta rows that MongoDB lacks or holds older go through the job's own guarded upserts
(``spec_upsert`` + ``apply_upserts``); documents MongoDB holds newer than Delta (a hand edit: the job writes Delta
first) are overwritten only if they still hold the value read; documents Delta lacks are deleted the same way.

Then the assets' health (``health``, worst open severity, open count and ids), which the job writes to ``assets`` in
a step of its own, guarded by its own pair ``(health_version, health_event_id)``: MongoDB read again (after the
assets' repair, so a restored document is compared too), then Delta; values and pair compared (``compare_health``).
Missing or older health goes through the job's guarded health update (``mongo_health_update``); anything else (a
newer pair, or the same pair with other values, or Delta holding no pair) is overwritten only if the document still
holds the pair read. Reported as the ``asset_health`` entry.

MongoDB is read before Delta on purpose: the job commits Delta before MongoDB, so every document read was already in
Delta when Delta is read, and a batch committed meanwhile can only make Delta newer, which the guarded upserts handle.
Safe while the stream runs. Resolved incidents outside the recent window (``window``) are not restored.

    python -m processors.lake.reconcile --tenant T [--dry-run]
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import MongoClient
from pymongo.collection import Collection
from pyspark.sql import SparkSession

from metalake.settings import get_settings
from processors.enrichment.health import HEALTH, HEALTH_COLUMNS, HEALTH_FIELDS, mongo_health_update
from processors.enrichment.projection import apply_updates, apply_upserts, spec_upsert
from processors.enrichment.state import ASSETS, INCIDENTS, STATE_SPECS, StateSpec
from processors.lake import window
from processors.lake.diff import Difference, Held, compare, compare_health
from processors.lake.discover import tenant_names
from processors.lake.runner import progress, run
from processors.lake.sparkio import is_delta, lake_session, read_rows
from tenants.naming import TenantNames

log = logging.getLogger("processors.lake.reconcile")  # not __main__ under python -m

# What the health comparison reads and compares; health_updated_at is left out (when it ran, not what it found), but
# copied with the rest on repair.
HEALTH_HELD = (*HEALTH_FIELDS, "health_version", "health_event_id")


@dataclass
class SpecResult:
    table: str
    collection: str
    delta_rows: int
    difference: Difference
    upserted: int = 0
    replaced: int = 0
    deleted: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "collection": self.collection,
            "delta_rows": self.delta_rows,
            "difference": self.difference.counts(),
            "upserted": self.upserted,
            "replaced": self.replaced,
            "deleted": self.deleted,
        }


def _held(doc: dict[str, Any]) -> Held:
    return (doc.get("version"), doc.get("event_id"))


def _guard(doc_id: str, held: Held) -> dict[str, Any]:
    """Match the document only while it still holds what reconcile read (a concurrent job write wins)."""
    return {"_id": doc_id, "version": held[0], "event_id": held[1]}


def reconcile_spec(
    spark: SparkSession,
    collection: Collection[dict[str, Any]],
    names: TenantNames,
    spec: StateSpec,
    dry_run: bool,
    window_before: datetime,
) -> SpecResult:
    mongo = {str(d["_id"]): _held(d) for d in collection.find({}, {"version": 1, "event_id": 1})}
    path = names.delta_path(spec.table)
    rows: dict[str, dict[str, Any]] = {}
    if is_delta(spark, path):
        rows = {spec.mongo_id(r): r for r in read_rows(spark, path, spec.columns)}
    ignore = [i for i, r in rows.items() if spec is INCIDENTS and window.outside_window(r, window_before)]
    diff = compare({i: (r["version"], r["event_id"]) for i, r in rows.items()}, mongo, ignore)
    result = SpecResult(spec.table, spec.collection, len(rows), diff)
    if dry_run or diff.total == 0:
        return result
    build = spec_upsert(spec)
    applied, _stale = apply_upserts(collection, (build(rows[i]) for i in [*diff.missing, *diff.behind]))
    result.upserted = applied
    for doc_id in diff.ahead:
        op = build(rows[doc_id])
        result.replaced += collection.update_one(_guard(doc_id, mongo[doc_id]), op["u"]).modified_count
    for doc_id in diff.extra:
        result.deleted += collection.delete_one(_guard(doc_id, mongo[doc_id])).deleted_count
    return result


def reconcile_health(
    spark: SparkSession, collection: Collection[dict[str, Any]], names: TenantNames, dry_run: bool
) -> SpecResult:
    """Compare (and unless ``dry_run`` repair) the health columns of the assets both sides hold. ``upserted``
    counts the job's guarded health updates that matched, ``replaced`` the overwrites guarded by the pair read."""
    mongo = {str(d["_id"]): d for d in collection.find({}, dict.fromkeys(HEALTH_HELD, 1))}
    path = names.delta_path(ASSETS.table)
    rows: dict[str, dict[str, Any]] = {}
    if is_delta(spark, path):
        rows = {str(r["urn"]): r for r in read_rows(spark, path, ("urn", *HEALTH_COLUMNS))}
    diff = compare_health(rows, mongo, HEALTH_HELD)
    result = SpecResult(HEALTH.table, HEALTH.collection, len(rows), diff)
    if dry_run or diff.total == 0:
        return result
    guarded = [i for i in [*diff.missing, *diff.behind] if rows[i]["health_version"] is not None]
    result.upserted = apply_updates(collection, (mongo_health_update(rows[i]) for i in guarded))
    for doc_id in sorted({*diff.missing, *diff.behind, *diff.ahead} - set(guarded)):
        held = mongo[doc_id]
        guard = {"_id": doc_id, **{c: held.get(c) for c in ("health_version", "health_event_id")}}
        update = {"$set": {c: rows[doc_id][c] for c in HEALTH_COLUMNS}}
        result.replaced += collection.update_one(guard, update).modified_count
    return result


def reconcile(
    spark: SparkSession,
    mongo: MongoClient[dict[str, Any]],
    names: TenantNames,
    dry_run: bool = False,
    window_days: int = window.DEFAULT_DAYS,
    echo: Callable[[str], None] = progress,
) -> list[SpecResult]:
    """Compare (and unless ``dry_run`` repair) every state collection of the tenant; one result per spec."""
    before = window.cutoff(datetime.now(UTC), window_days)
    database = mongo[names.mongo_database]
    results = []
    for spec in STATE_SPECS:
        echo(f"reconcile {names.tenant_id}: {spec.table} -> {spec.collection} ...")
        result = reconcile_spec(spark, database[spec.collection], names, spec, dry_run, before)
        echo(f"  {result.delta_rows} rows in Delta, differences {result.difference.counts()}")
        log.info("lake.reconciled", extra={"dry_run": dry_run, **result.as_dict()})
        results.append(result)
    echo(f"reconcile {names.tenant_id}: asset health -> {ASSETS.collection} ...")
    health = reconcile_health(spark, database[ASSETS.collection], names, dry_run)
    echo(f"  {health.delta_rows} rows in Delta, differences {health.difference.counts()}")
    log.info("lake.reconciled", extra={"dry_run": dry_run, **health.as_dict()})
    results.append(health)
    return results


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m processors.lake.reconcile", description=__doc__.split("\n")[0])
    parser.add_argument("--tenant", required=True, help="The tenant to reconcile.")
    parser.add_argument("--dry-run", action="store_true", help="Only report the difference; change nothing.")
    parser.add_argument(
        "--window-days",
        type=int,
        default=window.DEFAULT_DAYS,
        help=f"Resolved incidents older than this stay out of MongoDB (default {window.DEFAULT_DAYS}, as prune).",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = get_settings()

    def body() -> dict[str, Any]:
        names = tenant_names(args.tenant, settings.lake_root)
        spark = lake_session(settings, "metalake-lake-reconcile")
        mongo: MongoClient[dict[str, Any]] = MongoClient(
            settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms
        )
        try:
            results = reconcile(spark, mongo, names, args.dry_run, args.window_days)
        finally:
            mongo.close()
            spark.stop()
        return {
            "tenant": names.tenant_id,
            "dry_run": args.dry_run,
            "differences": sum(r.difference.total for r in results),
            "collections": [r.as_dict() for r in results],
        }

    return run("reconcile", body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
