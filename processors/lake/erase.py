"""GDPR erase of one asset: every row naming its URN leaves the tenant's Delta rows and MongoDB, physically: its own
rows and other assets' rows that name it (edges to it, tags propagated from or through it: ``scope``).

Steps: find the other spellings of the URN the tenant's rows hold (``stored_urns``: rows written before every entry
point canonicalised URNs), DELETE the rows (predicates in ``scope``: they compare hashes, so the Delta log records no
URN), each limited to the tenant's rows (``LakeTable.where``: its bucket and id on a shared pooled table), purge the
files that held them from disk (``purge``: VACUUM with a retention of 0 hours, touched tables only), delete the
MongoDB documents, and append an audit row holding the URN's keyed hash (``control.erased``) and counts only. A
pooled tenant's rows are in the shared tables; a folder the old layout left for it is erased too
(``discover.places``), so no copy stays behind.

The 0-hour VACUUM is what GDPR asks and it has a price: time travel to versions before the erase no longer works on
the touched tables, for every tenant of a touched shared table. Events about the URN published after the erase
recreate it: stop the source first.

The tenant's connector offsets (``metalake.connect.offsets``) that name the URN are rewritten without it or
tombstoned (``control.connectors.offsets``); the superseded records stay until the topic's compaction removes them.

Dead letters are raw bytes: those whose key, value or headers spell the URN are found by a read-only filter and
deleted by their Kafka position (``scope.raw_pattern``, ``scope.identity_predicate``), so the log still names no URN.

Before all that, the URN's keyed hash joins the tenant's erased set (``control.erased``): the admin API hides the
dead letters of the Kafka DLQ topics that name it, which cannot be deleted one by one, and refuses to replay them.

Last, an ``io.metalake.asset.erased.v1`` (tenant, erasure id, the URN's keyed hash) goes to ``metalake.changes`` with
confirmed delivery: the propagation processor then reloads the tenant instead of keeping the erased asset in memory.
If Kafka cannot confirm it, the erase still succeeds and its report says the processor must be restarted.

    python -m processors.lake erase --tenant T --urn U --actor A [--include-children]
"""

from __future__ import annotations

import logging
import operator
import re
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce
from typing import Any

from confluent_kafka import KafkaException
from pymongo import MongoClient
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from control.connectors.offsets import OffsetStore
from control.erased import ErasedUrns, urn_hasher
from metalake.kafka import EventProducer, EventPublisher, PublishError
from metalake.mongo import mongo_client
from processors.enrichment.single_writer import NoWriterLeases, WriterLeases
from processors.lake import audit
from processors.lake.discover import connect, places
from processors.lake.errors import LakeUsageError
from processors.lake.purge import (
    UNTRACKED_GRACE_S,
    count_rows,
    delete_rows,
    purge_removed,
    purge_untracked,
    relative,
)
from processors.lake.runner import progress
from processors.lake.scope import (
    DLQ_IDENTITY,
    RAW_COLUMNS,
    EraseTarget,
    KafkaPosition,
    delta_predicates,
    erase_target,
    identity_predicate,
    mongo_filters,
    raw_pattern,
    with_spellings,
)
from processors.lake.settings import LakeWorkerSettings
from processors.lake.sparkio import is_delta, lake_session
from processors.propagation.erasure import erased_event
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE, LakeTable, TenantNames

log = logging.getLogger("processors.lake.erase")  # not __main__ under python -m

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
    # Records of the connectors' offsets topic that named the URN: rewritten without it, or tombstoned.
    offsets: dict[str, int] = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    propagation_notified: bool = False

    def counts(self) -> dict[str, int]:
        return {
            **{f"delta.{t}": n for t, n in self.delta_rows.items()},
            **{f"mongo.{c}": n for c, n in self.mongo_documents.items()},
            **{f"offsets.{k}": n for k, n in self.offsets.items()},
        }


# The columns that hold an asset's own URN (or an edge's or a propagated tag's other end), per table: where another
# spelling of the URN would have been stored.
URN_COLUMNS: dict[str, tuple[str, ...]] = {
    "events": ("subject",),
    "assets": ("urn",),
    "classifications": ("urn",),
    "lineage_edges": ("urn", "upstream"),
    "incidents": ("urn",),
    "propagated_tags": ("urn", "origin"),
    "asset_edits": ("urn",),
}


def stored_urns(
    spark: SparkSession, mongo: MongoClient[dict[str, Any]], names: TenantNames, target: EraseTarget
) -> set[str]:
    """The distinct URNs of the tenant's rows that start like the target's (its platform): the candidates for other
    spellings of it (``scope.with_spellings`` decides). Reads only: the filter spells the platform, never the URN."""
    prefix = target.platform_prefix
    found: set[str] = set()
    for table, columns in URN_COLUMNS.items():
        for place in places(names, table):
            if not is_delta(spark, place.path):
                continue
            frame = spark.read.format("delta").load(str(place.path))
            if place.predicate is not None:
                frame = frame.where(place.predicate)
            for column in (c for c in columns if c in frame.columns):
                starts = F.substring(F.col(column), 1, len(prefix)) == F.lit(prefix)
                rows = frame.where(starts).select(column).distinct().collect()
                found.update(r[0] for r in rows if isinstance(r[0], str))
    # The projection may lead the lake (the job's projection queries write it apart from the lake query).
    ids = mongo[names.mongo_database]["assets"].distinct("_id", {"_id": {"$regex": "^" + re.escape(prefix)}})
    found.update(i for i in ids if isinstance(i, str))
    return found


def dead_letters_naming(frame: DataFrame, target: EraseTarget) -> list[KafkaPosition]:
    """The Kafka positions of the dead letters whose raw key, value or headers spell the URN. A read: no Delta
    commit records the filter, which has to spell the URN (raw bytes have no field to hash)."""
    pattern = raw_pattern(target)
    spelled = [F.col(c).cast("string").rlike(pattern) for c in RAW_COLUMNS if c in frame.columns]
    if not spelled:
        return []
    rows = frame.where(reduce(operator.or_, spelled)).select(*DLQ_IDENTITY).distinct().collect()
    return [KafkaPosition(r["kafka_topic"], r["kafka_partition"], r["kafka_offset"]) for r in rows]


def _erase_place(
    spark: SparkSession,
    place: LakeTable,
    predicate: str,
    target: EraseTarget,
    report: EraseReport,
    leases: WriterLeases | None = None,
) -> bool:
    """DELETE the rows of one place naming the target, limited to the tenant's rows (``place.where``), then purge
    the files the DELETE removed; True when it had rows."""
    if place.name == DLQ:
        # Only the tenant's dead letters are searched: another tenant's raw bytes may spell the same URN.
        tenant_rows = spark.read.format("delta").load(str(place.path))
        if place.predicate is not None:
            tenant_rows = tenant_rows.where(place.predicate)
        by_position = identity_predicate(dead_letters_naming(tenant_rows, target))
        predicate = f"{predicate} OR {by_position}" if by_position else predicate
    # Count first: DELETE reports nothing to Python, and a table without matches must not get an empty commit
    # (nor a VACUUM that would cost its time travel, every tenant's on a shared table, for nothing).
    matched = count_rows(spark, place.path, place.where(predicate))
    report.delta_rows[place.name] = report.delta_rows.get(place.name, 0) + matched
    if matched == 0:
        return False
    # On S3 the DELETE and its purge hold the table's writer lease (the job's next batch on it waits).
    with (leases or NoWriterLeases()).holding([place.path]) as fence:
        delete_rows(spark, place, predicate, fence)
        purge_removed(spark, place.path, fence)
    return True


def erase_delta(  # noqa: PLR0913
    spark: SparkSession,
    names: TenantNames,
    target: EraseTarget,
    report: EraseReport,
    grace_s: float = UNTRACKED_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
    leases: WriterLeases | None = None,
) -> None:
    """Every place of every table (``discover.places``: the tier's, and what the old layout left), the tenant's rows
    only. The purge runs on the touched tables only: on a shared one it costs every tenant's time travel."""
    touched: list[LakeTable] = []
    for table, predicate in delta_predicates(target).items():
        for place in places(names, table):
            if not is_delta(spark, place.path):
                continue
            report.delta_rows.setdefault(table, 0)
            if _erase_place(spark, place, predicate, target, report, leases):
                touched.append(place)
                report.vacuumed.append(relative(names.lake_root, place.path))
    purge_untracked(spark, touched, grace_s, sleep, leases)


def erase_mongo(
    mongo: MongoClient[dict[str, Any]], names: TenantNames, target: EraseTarget, report: EraseReport
) -> None:
    database = mongo[names.mongo_database]
    for collection, query in mongo_filters(target).items():
        report.mongo_documents[collection] = database[collection].delete_many(query).deleted_count


def erase_offsets(store: OffsetStore, names: TenantNames, target: EraseTarget, report: EraseReport) -> None:
    """Rewrite or tombstone the tenant's connector offsets that name the URN (any spelling; children too if asked):
    ``GET .../connectors/{name}/offsets`` and the topic's latest values then no longer hold it. The superseded
    records stay in the compacted topic until compaction (``control.connectors.offsets.topic_config``)."""
    rewritten, tombstoned = store.forget_urn(names.tenant_id, target.urn, target.include_children)
    report.offsets = {"rewritten": rewritten, "tombstoned": tombstoned}


def announce(
    publisher: EventPublisher, names: TenantNames, target: EraseTarget, report: EraseReport, echo: Callable[[str], None]
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


def erase(  # noqa: PLR0913
    spark: SparkSession,
    mongo: MongoClient[dict[str, Any]],
    settings: LakeWorkerSettings,
    names: TenantNames,
    target: EraseTarget,
    actor: str,
    echo: Callable[[str], None] = progress,
    grace_s: float = UNTRACKED_GRACE_S,
    publisher: EventPublisher | None = None,
    erasure_id: str | None = None,
    offsets: OffsetStore | None = None,
    leases: WriterLeases | None = None,
) -> EraseReport:
    """Erase ``target`` from the tenant's Delta tables, MongoDB and connector offsets (``offsets``, by default a
    store of its own), announce it on ``metalake.changes`` (through ``publisher``, by default a producer of its own),
    then audit it. Idempotent: erasing again finds nothing, announces again and records a second audit row. A failure
    midway is audited as ``failed`` and raised; rerun to finish. Delta goes first: the projection is rebuilt from
    Delta (reconcile), so the reverse order could resurrect it; the announcement goes after both, since the
    propagation processor reloads from MongoDB on it."""
    if not actor.strip():
        raise LakeUsageError("--actor must name who requests the erase")
    try:
        # Checked before anything is deleted: the announcement's schema takes a UUID only.
        report = EraseReport(target.target_hash, str(uuid.UUID(erasure_id)) if erasure_id else str(uuid.uuid4()))
    except ValueError:
        raise LakeUsageError("--erasure-id must be a UUID") from None
    audit.ensure_audit_table(settings, names)
    action = "erase.asset_and_children" if target.include_children else "erase.asset"
    # First: from now on the admin API hides and refuses to replay the dead letters naming it (Kafka keeps them).
    ErasedUrns(mongo[CONTROL_DATABASE]).add(names.tenant_id, target.target_hash, target.include_children)
    try:
        echo(f"erase {names.tenant_id}: looking for other spellings of the URN ...")
        target = with_spellings(target, stored_urns(spark, mongo, names, target))
        echo(f"erase {names.tenant_id}: deleting from Delta and vacuuming touched tables ...")
        erase_delta(spark, names, target, report, grace_s, leases=leases)
        echo(f"erase {names.tenant_id}: deleting from MongoDB ...")
        erase_mongo(mongo, names, target, report)
        echo(f"erase {names.tenant_id}: scrubbing the connectors' offsets ...")
        store = offsets if offsets is not None else OffsetStore(settings)
        try:
            erase_offsets(store, names, target, report)
        finally:
            if offsets is None:
                store.close()
    except Exception:
        audit.record(settings, names, actor, action, target.target_hash, "failed", report.counts())
        raise
    echo(f"erase {names.tenant_id}: announcing the erase on {CHANGES_TOPIC} ...")
    if publisher is None:
        with EventProducer(settings) as producer:
            announce(producer, names, target, report, echo)
    else:
        announce(publisher, names, target, report, echo)
    counts = {**report.counts(), "propagation_notified": int(report.propagation_notified)}
    audit.record(settings, names, actor, action, target.target_hash, "done", counts)
    log.info("lake.erased", extra={"target_hash": target.target_hash, "counts": report.counts()})
    return report


def erase_report(
    settings: LakeWorkerSettings, tenant: str, urn: str, actor: str, include_children: bool, erasure_id: str | None
) -> dict[str, Any]:
    """The report of ``python -m processors.lake erase`` (``processors.lake.main``): progress on stderr."""
    erasure_id = _uuid(erasure_id) if erasure_id is not None else None
    # Validate before Spark starts: a typo must be refused in a second, not after the JVM boots.
    if not actor.strip():
        raise LakeUsageError("--actor must name who requests the erase")
    with connect(settings) as directory:
        names = directory.named(tenant)
    target = erase_target(names.tenant_id, urn, include_children, urn_hasher(settings))
    spark = lake_session(settings, "metalake-lake-erase")
    mongo = mongo_client(settings)
    try:
        # On S3 each Spark commit holds its table's writer lease (``single_writer``); a local lake needs none.
        leases = (
            WriterLeases.in_database(mongo[CONTROL_DATABASE], settings.lake.writer_lease)
            if settings.lake_on_s3
            else None
        )
        report = erase(spark, mongo, settings, names, target, actor, erasure_id=erasure_id, leases=leases)
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
        "offsets": report.offsets,
        "propagation_notified": report.propagation_notified,
        **({} if report.propagation_notified else {"action_required": RESTART_PROCESSOR}),
    }


def _uuid(value: str) -> str:
    try:
        return str(uuid.UUID(value))
    except ValueError:
        raise LakeUsageError("--erasure-id must be a UUID") from None
