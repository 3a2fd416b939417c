"""Rebuild the MongoDB projection of a tenant from Delta and report the difference (0 on a healthy tenant).

The tenant's Delta rows are those of its tier (``discover``): a dedicated tenant's own tables, a pooled tenant's
rows of the shared tables (read with its predicate: its bucket's files, its id). A folder the old layout left for a
pooled tenant is no longer written, so it is not read.

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

The job writes MongoDB in projection queries of their own, apart from (usually a moment before) the lake query's
Delta commit, so a document ahead of Delta or missing from it may be in flight: those are read again from Delta after
``SETTLE_S`` and count (and are repaired) only if they still differ. Missing and behind documents are repaired by
guarded upserts, which a newer concurrent write wins. Run it while the lake query keeps up: one lagging by more than
``SETTLE_S`` would make documents it has yet to commit look like hand edits. Safe while the stream runs. Resolved
incidents outside the recent window (``window``) are not restored.

    python -m processors.lake reconcile --tenant T [--dry-run]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pymongo import MongoClient
from pymongo.collection import Collection
from pyspark.sql import SparkSession

from metalake.mongo import mongo_client
from processors.enrichment.health import HEALTH, HEALTH_COLUMNS, HEALTH_FIELDS, mongo_health_update
from processors.enrichment.projection import apply_updates, apply_upserts, spec_upsert
from processors.enrichment.state import ASSETS, INCIDENTS, STATE_SPECS, StateSpec
from processors.lake import window
from processors.lake.diff import Difference, Held, compare, compare_health
from processors.lake.discover import connect
from processors.lake.runner import progress
from processors.lake.settings import LakeWorkerSettings
from processors.lake.sparkio import is_delta, lake_session, read_rows
from tenants.naming import TenantNames

log = logging.getLogger("processors.lake.reconcile")  # not __main__ under python -m

# How long the lake query gets to commit what the projection queries already wrote to MongoDB, before a document
# ahead of Delta or missing from it counts as a difference: many of its triggers (1 s) and batches.
SETTLE_S = 15.0
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


def _delta_rows(
    spark: SparkSession, names: TenantNames, table: str, columns: tuple[str, ...], key: Callable[[dict[str, Any]], str]
) -> dict[str, dict[str, Any]]:
    """The tenant's rows of ``table`` by document id (its rows of the shared table for a pooled tenant)."""
    place = names.table(table)
    if not is_delta(spark, place.path):
        return {}
    return {key(r): r for r in read_rows(spark, place.path, columns, place.predicate)}


def _pairs(rows: dict[str, dict[str, Any]]) -> dict[str, Held]:
    return {i: (r["version"], r["event_id"]) for i, r in rows.items()}


def reconcile_spec(  # noqa: PLR0913
    spark: SparkSession,
    collection: Collection[dict[str, Any]],
    names: TenantNames,
    spec: StateSpec,
    dry_run: bool,
    window_before: datetime,
    settle: Callable[[], None] = lambda: time.sleep(SETTLE_S),
) -> SpecResult:
    mongo = {str(d["_id"]): _held(d) for d in collection.find({}, {"version": 1, "event_id": 1})}

    def read() -> dict[str, dict[str, Any]]:
        return _delta_rows(spark, names, spec.table, spec.columns, spec.mongo_id)

    rows = read()
    ignore = [i for i, r in rows.items() if spec is INCIDENTS and window.outside_window(r, window_before)]
    diff = compare(_pairs(rows), mongo, ignore)
    if diff.ahead or diff.extra:
        # The projection queries write MongoDB apart from (usually before) the lake query's Delta commit: a document
        # ahead of Delta, or missing from it, may be in flight. Only what still is once the lake query had time to
        # commit is a hand edit (or a lake query far behind: see docs/lake.md).
        settle()
        rows = {**rows, **read()}
        again = compare(_pairs(rows), {i: mongo[i] for i in [*diff.ahead, *diff.extra]})
        diff.ahead = [i for i in diff.ahead if i in again.ahead]
        diff.extra = [i for i in diff.extra if i in again.extra]
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
    spark: SparkSession,
    collection: Collection[dict[str, Any]],
    names: TenantNames,
    dry_run: bool,
    settle: Callable[[], None] = lambda: time.sleep(SETTLE_S),
) -> SpecResult:
    """Compare (and unless ``dry_run`` repair) the health columns of the assets both sides hold. ``upserted``
    counts the job's guarded health updates that matched, ``replaced`` the overwrites guarded by the pair read."""
    mongo = {str(d["_id"]): d for d in collection.find({}, dict.fromkeys(HEALTH_HELD, 1))}

    def read() -> dict[str, dict[str, Any]]:
        return _delta_rows(spark, names, ASSETS.table, ("urn", *HEALTH_COLUMNS), lambda r: str(r["urn"]))

    rows = read()
    diff = compare_health(rows, mongo, HEALTH_HELD)
    if diff.ahead:  # as in reconcile_spec: MongoDB's health may lead Delta's for a batch
        settle()
        rows = {**rows, **read()}
        diff.ahead = [i for i in diff.ahead if i in compare_health(rows, mongo, HEALTH_HELD).ahead]
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


def reconcile_report(
    settings: LakeWorkerSettings, tenant: str, dry_run: bool, window_days: int, spark: SparkSession | None = None
) -> dict[str, Any]:
    """The report of ``python -m processors.lake reconcile`` (``processors.lake.main``): progress on stderr. With
    ``spark``, that session is used (and left running) instead of one of its own."""
    with connect(settings) as directory:
        names = directory.named(tenant)
    session = spark or lake_session(settings, "metalake-lake-reconcile")
    mongo = mongo_client(settings)
    try:
        results = reconcile(session, mongo, names, dry_run, window_days)
    finally:
        mongo.close()
        if spark is None:
            session.stop()
    return {
        "tenant": names.tenant_id,
        "dry_run": dry_run,
        "differences": sum(r.difference.total for r in results),
        "collections": [r.as_dict() for r in results],
    }
