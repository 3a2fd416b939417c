"""Rows that must physically leave a Delta table (GDPR erase, tenant deletion): DELETE, then the files gone from disk.

DELETE only marks the files that held the rows removed in the Delta log; time travel still reads them. Two VACUUM
passes delete them without ever deleting a file a concurrent writer is about to commit: LITE with 0 hours (exactly
the files the Delta log marks removed), then a full VACUUM that spares untracked files younger than a grace period
(60 s), after waiting until the leftovers of lost commit races, which may hold the rows, are older (on a shared
table, those of the tenant's bucket: the only files that can hold its rows).

Either pass is table-wide: on a shared pooled table it also deletes the files other tenants' writes removed, so time
travel to versions before the purge is lost for every tenant of that table (docs/lake.md). Deletion vectors are off
for these tables (Trino compatibility, ``enrichment.session``): a DELETE rewrites files, so no ``REORG ... PURGE``
is needed before the VACUUM.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from metalake.lake_uri import LakeRoot, S3Path, local_path, spark_uri
from processors.enrichment.commits import retry_conflicts
from processors.enrichment.single_writer import NO_FENCE, Fence, NoWriterLeases, WriterLeases
from tenants.naming import LakeTable

log = logging.getLogger(__name__)

RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# A streaming batch writes its files and commits them within seconds; an untracked file older than this is a
# leftover of a write that lost a commit race, never a file a running write is about to commit.
UNTRACKED_GRACE_S = 60.0


@contextmanager
def _no_retention_check(spark: SparkSession) -> Iterator[None]:
    """Delta's retention safety check off for the enclosed calls only (restored even on failure)."""
    previous = spark.conf.get(RETENTION_CHECK, "true") or "true"
    spark.conf.set(RETENTION_CHECK, "false")
    try:
        yield
    finally:
        spark.conf.set(RETENTION_CHECK, previous)


def count_rows(spark: SparkSession, path: LakeRoot, predicate: str | None) -> int:
    frame = spark.read.format("delta").load(spark_uri(path))
    return (frame if predicate is None else frame.where(predicate)).count()


def delete_rows(spark: SparkSession, place: LakeTable, predicate: str | None, fence: Fence = NO_FENCE) -> None:
    """DELETE ``predicate`` limited to the tenant's rows of ``place`` (``LakeTable.where``): on a shared table a
    predicate can never reach another tenant's rows. A table of its own with no predicate loses every row. On S3 the
    caller holds the table's writer lease (``fence``, checked before each attempt)."""
    where = place.where(predicate)

    def delete() -> None:
        fence.check()
        DeltaTable.forPath(spark, str(place.path)).delete(where)

    retry_conflicts(delete, place.name)


def purge_removed(spark: SparkSession, path: LakeRoot, fence: Fence = NO_FENCE) -> None:
    """VACUUM LITE with 0 hours: delete now every file the Delta log marks removed (the DELETE's), and only those.
    Delta falls back to a full listing only when LITE lacks the log since the last vacuum."""
    fence.check()  # VACUUM commits its start and end to the log
    with _no_retention_check(spark):
        try:
            spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS LITE").collect()
        except Exception as exc:  # Delta raises a generic error when LITE lacks the log since the last vacuum
            if "VACUUM_LITE" not in str(exc):
                raise
            log.warning("lake.vacuum_full_fallback", extra={"table": path.name})
            spark.sql(f"VACUUM delta.`{path}` RETAIN 0 HOURS").collect()


def untracked_files(spark: SparkSession, table: LakeRoot) -> list[Path]:
    """Data files under the table folder that the current snapshot does not reference: leftovers of writes that
    lost a commit race (they may hold the erased rows) or writes still in flight."""
    path = local_path(table, "purging a table's untracked files")
    live = {unquote(urlparse(f).path) for f in spark.read.format("delta").load(str(path)).inputFiles()}
    return [p for p in path.rglob("*.parquet") if "_delta_log" not in p.parts and str(p) not in live]


def could_hold(place: LakeTable, file: Path) -> bool:
    """Whether an untracked data file of ``place`` may hold the tenant's rows: any file of a table of its own; of a
    shared table (partitioned by bucket) only the files in its bucket's folders."""
    return place.bucket is None or f"tenant_bucket={place.bucket}" in file.parts


def purge_untracked(
    spark: SparkSession,
    places: list[LakeTable],
    grace_s: float,
    sleep: Callable[[float], None],
    leases: WriterLeases | None = None,
) -> None:
    """Delete the untracked files of the tables with a full VACUUM that spares files younger than ``grace_s`` (a
    concurrent writer's files before its commit). First wait until every untracked file seen now that may hold the
    tenant's rows is older than the grace, so such a leftover written just before the purge is not spared. On a
    shared table the job keeps writing other buckets meanwhile: their files hold none of the tenant's rows, so they
    do not make the purge wait (they are spared by the grace, and deleted by a later purge or maintain).

    On S3 a table's VACUUM holds its writer lease (``leases``, ``single_writer``), and every Spark writer there writes
    its files while holding it: no write is in flight meanwhile, so every untracked file is a leftover (of a writer
    that died) and goes with no grace and no wait."""
    local = [p for p in places if not isinstance(p.path, S3Path)]
    now = time.time()
    youngest = max(
        (p.stat().st_mtime for t in local for p in untracked_files(spark, t.path) if could_hold(t, p)), default=None
    )
    if youngest is not None and now - youngest < grace_s:
        sleep(grace_s - (now - youngest) + 1)
    writers = leases or NoWriterLeases()
    with _no_retention_check(spark):
        for place in places:
            with writers.holding([place.path]) as fence:
                fence.check()
                hours = 0.0 if isinstance(place.path, S3Path) else grace_s / 3600
                DeltaTable.forPath(spark, str(place.path)).vacuum(hours)


def relative(lake_root: LakeRoot, path: LakeRoot) -> str:
    """A table's folder as reports name it: relative to the lake root (``_pooled/events``, ``acme/audit``)."""
    return str(path.relative_to(lake_root)) if path.is_relative_to(lake_root) else str(path)
