"""GDPR erase of one asset: every row naming its URN leaves every Delta table of the tenant and MongoDB, physically:
its own rows and other assets' rows that name it (edges to it, tags propagated from or through it: ``scope``).

Steps: DELETE the rows (predicates in ``scope``: they compare hashes, so the Delta log records no URN), VACUUM the
touched tables with a retention of 0 hours so the files that held the rows are deleted from disk, delete the MongoDB
documents, and append an audit row holding the URN's sha256 and counts only.

The 0-hour VACUUM is what GDPR asks and it has a price: time travel to versions before the erase no longer works on
the touched tables. It runs in two passes that never delete a file a concurrent writer is about to commit: LITE with
0 hours (exactly the files the Delta log marks removed), then a full VACUUM that spares untracked files younger than
a grace period (60 s), after waiting until the leftovers of lost commit races, which may hold the rows, are older.
Events about the URN published after the erase recreate it: stop the source first.

Dead letters are raw bytes: those whose key, value or headers spell the URN are found by a read-only filter and
deleted by their Kafka position (``scope.raw_pattern``, ``scope.identity_predicate``), so the log still names no URN.

Last, an ``io.metalake.asset.erased.v1`` (tenant, erasure id, the URN's sha256) goes to ``metalake.changes`` with
confirmed delivery: the propagation processor then reloads the tenant instead of keeping the erased asset in memory.
If Kafka cannot confirm it, the erase still succeeds and its report says the processor must be restarted.

    python -m processors.lake.erase --tenant T --urn U --actor A [--include-children]
"""

from __future__ import annotations

import argparse
import logging
import operator
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from confluent_kafka import KafkaException
from delta.tables import DeltaTable
from pymongo import MongoClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from metalake.kafka import EventProducer, PublishError
from metalake.settings import Settings, get_settings
from processors.enrichment.writer import retry_conflicts
from processors.lake import audit
from processors.lake.discover import tenant_names
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress, run
from processors.lake.scope import (
    DLQ_IDENTITY,
    RAW_COLUMNS,
    EraseTarget,
    delta_predicates,
    erase_target,
    identity_predicate,
    mongo_filters,
    raw_pattern,
)
from processors.lake.sparkio import is_delta, lake_session
from processors.propagation.erasure import erased_event
from processors.propagation.processor import Publisher
from tenants.naming import CHANGES_TOPIC, TenantNames

log = logging.getLogger("processors.lake.erase")  # not __main__ under python -m

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# A streaming batch writes its files and commits them within seconds; an untracked file older than this is a
# leftover of a write that lost a commit race, never a file a running write is about to commit.
UNTRACKED_GRACE_S = 60.0
DLQ = "_dlq"
RESTART_PROCESSOR = (
    "the propagation processor was not told of the erase (Kafka did not confirm it): restart every running "
    "`metalake propagation run` so it reloads the tenant; until then it may publish tags naming the erased asset"
)


@dataclass
class EraseReport:
    """Counts only (rows per Delta table, documents per collection): safe to log, print and audit."""

    target_hash: str
    erasure_id: str
    delta_rows: dict[str, int] = field(default_factory=dict)
    mongo_documents: dict[str, int] = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    propagation_notified: bool = False

    def counts(self) -> dict[str, int]:
        return {
            **{f"delta.{t}": n for t, n in self.delta_rows.items()},
            **{f"mongo.{c}": n for c, n in self.mongo_documents.items()},
        }


@contextmanager
def _no_retention_check(spark: SparkSession) -> Iterator[None]:
    """Delta's retention safety check off for the enclosed calls only (restored even on failure)."""
    previous = spark.conf.get(RETENTION_CHECK, "true") or "true"
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        yield
    finally:
        spark.conf.set(RETENTION_CHECK, previous)


def purge_removed(spark: SparkSession, path: Path) -> None:
    """VACUUM LITE with 0 hours: delete now every file the Delta log marks removed (the DELETE's), and only those.
    Delta falls back to a full listing only when LITE lacks the log since the last vacuum."""
    with _no_retention_check(spark):
        try:
            spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS LITE").collect()
        except Exception as exc:  # Delta raises a generic error when LITE lacks the log since the last vacuum
            if "VACUUM_LITE" not in str(exc):
                raise
            log.warning("lake.vacuum_full_fallback", extra={"table": path.name})
            spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()


def untracked_files(spark: SparkSession, path: Path) -> list[Path]:
    """Data files under the table folder that the current snapshot does not reference: leftovers of writes that
    lost a commit race (they may hold the erased rows) or writes still in flight."""
    live = {unquote(urlparse(f).path) for f in spark.read.format("delta").load(str(path)).inputFiles()}
    return [p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts and str(p) not in live]


def purge_untracked(spark: SparkSession, paths: list[Path], grace_s: float, sleep: Callable[[float], None]) -> None:
    """Delete the untracked files of the tables with a full VACUUM that spares files younger than ``grace_s`` (a
    concurrent writer's files before its commit). First wait until every untracked file seen now is older than
    the grace, so a leftover written just before the erase is not spared."""
    now = time.time()
    youngest = max((p.stat().st_mtime for t in paths for p in untracked_files(spark, t)), default=None)
    if youngest is not None and now - youngest < grace_s:
        sleep(grace_s - (now - youngest) + 1)
    with _no_retention_check(spark):
        for path in paths:
            DeltaTable.forPath(spark, str(path)).vacuum(grace_s / 3600)


def _delete(spark: SparkSession, path: Path, predicate: str) -> None:
    def delete() -> None:
        DeltaTable.forPath(spark, str(path)).delete(predicate)

    retry_conflicts(delete, path.name)


def dead_letters_naming(frame: DataFrame, target: EraseTarget) -> list[tuple[str | None, int | None, int | None]]:
    """The Kafka positions of the dead letters whose raw key, value or headers spell the URN. A read: no Delta
    commit records the filter, which has to spell the URN (raw bytes have no field to hash)."""
    pattern = raw_pattern(target)
    spelled = [F.col(c).cast("string").rlike(pattern) for c in RAW_COLUMNS if c in frame.columns]
    if not spelled:
        return []
    rows = frame.where(reduce(operator.or_, spelled)).select(*DLQ_IDENTITY).distinct().collect()
    return [(r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]) for r in rows]


def erase_delta(
    spark: SparkSession,
    names: TenantNames,
    target: EraseTarget,
    report: EraseReport,
    grace_s: float = UNTRACKED_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    for table, predicate in delta_predicates(target).items():
        path = names.delta_path(table)
        if not is_delta(spark, path):
            continue
        if table == DLQ:
            by_position = identity_predicate(dead_letters_naming(spark.read.format("delta").load(str(path)), target))
            predicate = f"{predicate} OR {by_position}" if by_position else predicate
        # Count first: DELETE reports nothing to Python, and a table without matches must not get an empty commit
        # (nor a VACUUM that would cost its time travel for nothing).
        matched = spark.read.format("delta").load(str(path)).where(predicate).count()
        report.delta_rows[table] = matched
        if matched == 0:
            continue
        _delete(spark, path, predicate)
        purge_removed(spark, path)
        report.vacuumed.append(table)
    purge_untracked(spark, [names.delta_path(t) for t in report.vacuumed], grace_s, sleep)


def erase_mongo(
    mongo: MongoClient[dict[str, Any]], names: TenantNames, target: EraseTarget, report: EraseReport
) -> None:
    database = mongo[names.mongo_database]
    for collection, query in mongo_filters(target).items():
        report.mongo_documents[collection] = database[collection].delete_many(query).deleted_count


def announce(
    publisher: Publisher, names: TenantNames, target: EraseTarget, report: EraseReport, echo: Callable[[str], None]
) -> None:
    """Publish the erased-asset event to ``metalake.changes`` and wait for Kafka's confirmation. A failure is not
    the erase's: the data is gone either way. It is reported (``propagation_notified`` false, a warning line)."""
    event = erased_event(names.tenant_id, report.erasure_id, target.target_hash, target.include_children)
    try:
        publisher.publish([event], lambda e: CHANGES_TOPIC)
    except (PublishError, KafkaException) as exc:
        log.warning(
            "lake.erase_not_announced",
            extra={"target_hash": target.target_hash, "erasure_id": report.erasure_id, "error": type(exc).__name__},
        )
        echo(f"erase {names.tenant_id}: WARNING: {RESTART_PROCESSOR}")
        report.propagation_notified = False
        return
    report.propagation_notified = True


def erase(
    spark: SparkSession,
    mongo: MongoClient[dict[str, Any]],
    settings: Settings,
    names: TenantNames,
    target: EraseTarget,
    actor: str,
    echo: Callable[[str], None] = progress,
    grace_s: float = UNTRACKED_GRACE_S,
    publisher: Publisher | None = None,
    erasure_id: str | None = None,
) -> EraseReport:
    """Erase ``target`` from the tenant's Delta tables and MongoDB, announce it on ``metalake.changes`` (through
    ``publisher``, by default a producer of its own), then audit it. Idempotent: erasing again finds nothing,
    announces again and records a second audit row. A failure midway is audited as ``failed`` and raised; rerun to
    finish. Delta goes first: the projection is rebuilt from Delta (reconcile), so the reverse order could resurrect
    it; the announcement goes after both, since the propagation processor reloads from MongoDB on it."""
    if not actor.strip():
        raise LakeUsageError("--actor must name who requests the erase")
    try:
        # Checked before anything is deleted: the announcement's schema takes a UUID only.
        report = EraseReport(target.target_hash, str(uuid.UUID(erasure_id)) if erasure_id else str(uuid.uuid4()))
    except ValueError:
        raise LakeUsageError("--erasure-id must be a UUID") from None
    audit.ensure_audit_table(spark, settings, names)
    action = "erase.asset_and_children" if target.include_children else "erase.asset"
    try:
        echo(f"erase {names.tenant_id}: deleting from Delta and vacuuming touched tables ...")
        erase_delta(spark, names, target, report, grace_s)
        echo(f"erase {names.tenant_id}: deleting from MongoDB ...")
        erase_mongo(mongo, names, target, report)
    except Exception:
        audit.record(spark, names, actor, action, target.target_hash, "failed", report.counts())
        raise
    echo(f"erase {names.tenant_id}: announcing the erase on {CHANGES_TOPIC} ...")
    if publisher is None:
        with EventProducer(settings) as producer:
            announce(producer, names, target, report, echo)
    else:
        announce(publisher, names, target, report, echo)
    counts = {**report.counts(), "propagation_notified": int(report.propagation_notified)}
    audit.record(spark, names, actor, action, target.target_hash, "done", counts)
    log.info("lake.erased", extra={"target_hash": target.target_hash, "counts": report.counts()})
    return report


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m processors.lake.erase", description=__doc__.split("\n")[0])
    parser.add_argument("--tenant", required=True, help="The tenant that holds the asset.")
    parser.add_argument("--urn", required=True, help="The asset's URN (urn:metalake:<platform>:<instance>/...).")
    parser.add_argument("--actor", required=True, help="Who requests the erase (recorded in the audit table).")
    parser.add_argument(
        "--include-children", action="store_true", help="Also erase assets under the URN (a table's columns)."
    )
    parser.add_argument(
        "--erasure-id",
        type=_uuid,
        help="The erase's id in its announcement and report (a UUID; default: a new one), e.g. the API's erasure id.",
    )
    return parser.parse_args(argv)


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise argparse.ArgumentTypeError("must be a UUID") from None


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = get_settings()

    def body() -> dict[str, Any]:
        # Validate before Spark starts: a typo must be refused in a second, not after the JVM boots.
        if not args.actor.strip():
            raise LakeUsageError("--actor must name who requests the erase")
        names = tenant_names(args.tenant, settings.lake_root)
        target = erase_target(names.tenant_id, args.urn, args.include_children)
        spark = lake_session(settings, "metalake-lake-erase")
        mongo: MongoClient[dict[str, Any]] = MongoClient(
            settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms
        )
        try:
            report = erase(spark, mongo, settings, names, target, args.actor, erasure_id=args.erasure_id)
        finally:
            mongo.close()
            spark.stop()
        return {
            "tenant": names.tenant_id,
            "erasure_id": report.erasure_id,
            "target_hash": report.target_hash,
            "delta_rows": report.delta_rows,
            "vacuumed": report.vacuumed,
            "mongo_documents": report.mongo_documents,
            "propagation_notified": report.propagation_notified,
            **({} if report.propagation_notified else {"action_required": RESTART_PROCESSOR}),
        }

    return run("erase", body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
