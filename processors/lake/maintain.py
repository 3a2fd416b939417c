"""Table maintenance: OPTIMIZE (compaction of small files), a checkpoint, and VACUUM.

What a selection maintains (``targets``): the shared pooled tables once for all the pooled tenants in it (a named
pooled tenant: OPTIMIZE limited to its bucket's partitions, ``WHERE tenant_bucket = N``), a dedicated tenant's own
tables, and every selected tenant's ``audit``; with every tenant selected, the unrouted dead letters too. A folder
the old layout left for a pooled tenant is no longer written and is left alone.

Safe while the stream runs: compaction only rewrites data (``dataChange = false``), so a concurrent blind append
never conflicts with it; a concurrent MERGE that rewrote a file being compacted makes one side lose, and this side
retries (``retry_conflicts``, the job's own policy). VACUUM keeps every file removed less than ``retention_hours``
ago, and never less than Delta's safety minimum (168 h), so readers of older snapshots (the job, Trino) keep working;
it is table-wide (a partition filter does not apply to it), which that retention makes harmless on a shared table.

    python -m processors.lake maintain [--tenant T] [--retention-hours H]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from metalake.lake_uri import LakeRoot, local_path
from metalake.settings import Settings
from processors.enrichment.commits import retry_conflicts
from processors.enrichment.tables import TABLES
from processors.lake.discover import connect
from processors.lake.errors import LakeUsageError, require_local_lake
from processors.lake.runner import progress
from processors.lake.sparkio import is_delta, lake_session, table_stats
from tenants.naming import POOLED_DIR, POOLED_TABLES, TenantNames, pooled_table_path, tenant_bucket, unrouted_lake_dir

log = logging.getLogger("processors.lake.maintain")  # not __main__ under python -m

DEFAULT_RETENTION_HOURS = 168
# Delta's own default (delta.deletedFileRetentionDuration = 1 week): below it a reader of a recent snapshot, such as
# a streaming batch in flight, could find its files gone.
MIN_RETENTION_HOURS = 168
# A dedicated tenant's own tables (the job's), beside the audit table every tenant has.
OWN_TABLES = tuple(spec.name for spec in TABLES)


@dataclass(frozen=True)
class Target:
    """One table to maintain: ``owner`` is the tenant, or ``_pooled`` for a shared table; ``where`` a partition
    predicate that limits OPTIMIZE (a named pooled tenant's bucket)."""

    owner: str
    table: str
    path: LakeRoot
    where: str | None = None


@dataclass(frozen=True)
class TableReport:
    tenant: str
    table: str
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    seconds: float
    where: str | None = None
    # Files OPTIMIZE removed (compacted into fewer): the file counts alone can grow meanwhile on a shared table the
    # streaming job keeps appending to.
    compacted: int = 0


def check_retention(hours: int) -> int:
    """``hours`` if it is safe; LakeUsageError otherwise (the erase command is the only way below the minimum)."""
    if hours < MIN_RETENTION_HOURS:
        raise LakeUsageError(
            f"--retention-hours {hours} is below Delta's safety minimum of {MIN_RETENTION_HOURS} h: readers of "
            "recent snapshots (the streaming job, Trino) could lose files"
        )
    return hours


def bucket_predicate(buckets: set[int]) -> str:
    ordered = sorted(buckets)
    if len(ordered) == 1:
        return f"tenant_bucket = {ordered[0]}"
    return f"tenant_bucket IN ({', '.join(map(str, ordered))})"


def targets(tenants: list[TenantNames], every_tenant: bool) -> list[Target]:
    """What maintaining ``tenants`` touches. The shared tables once, whatever the number of pooled tenants: whole
    when ``every_tenant``, else limited to the selected pooled tenants' buckets. Pure."""
    pooled = [n for n in tenants if not n.dedicated]
    out: list[Target] = []
    for root in sorted({n.lake_root for n in pooled}):  # one lake root but for tenants registered with their own
        here = {tenant_bucket(n.tenant_id) for n in pooled if n.lake_root == root}
        where = None if every_tenant else bucket_predicate(here)
        out += [Target(POOLED_DIR, t, pooled_table_path(root, t), where) for t in POOLED_TABLES]
    if every_tenant and tenants:
        # The pooled job's dead letters that name no valid tenant: nobody's, so only a whole-lake run keeps them.
        unrouted = unrouted_lake_dir(tenants[0].lake_root)
        out.append(Target(unrouted.name, "_dlq", unrouted / "_dlq"))
    for names in tenants:
        own = OWN_TABLES if names.dedicated else ()
        out += [Target(names.tenant_id, t, names.table(t).path) for t in (*own, "audit")]
    return out


def has_data_files(table: LakeRoot) -> bool:
    """Whether any parquet file exists under the table folder (live or awaiting VACUUM)."""
    path = local_path(table, "metalake lake maintain")
    return any(p.name.endswith(".parquet") for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def stats(spark: SparkSession, path: LakeRoot, where: str | None) -> tuple[int, int]:
    """(files, bytes) of the live files of the table, or of its partitions matching ``where``."""
    if where is None:
        return table_stats(spark, path)
    files = [
        Path(unquote(urlparse(f).path)) for f in spark.read.format("delta").load(str(path)).where(where).inputFiles()
    ]
    local_path(path, "metalake lake maintain")
    return len(files), sum(f.stat().st_size for f in files if f.exists())


def checkpoint(spark: SparkSession, path: LakeRoot) -> None:
    """Write a checkpoint of the latest version, so readers replay at most a few JSON commits. Delta's Python API has
    no call for it; the JVM one writes a file for an existing version and commits nothing, so it cannot conflict."""
    jvm: Any = spark.sparkContext._jvm  # noqa: SLF001 - py4j gateway; PySpark exposes no public handle
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path)).checkpoint()  # noqa: SLF001


def maintain_table(spark: SparkSession, target: Target, retention_hours: int) -> TableReport | None:
    """OPTIMIZE (within ``target.where``), checkpoint and VACUUM one table; None when it does not exist."""
    path = target.path
    if not is_delta(spark, path):
        return None
    started = time.monotonic()
    files_before, bytes_before = stats(spark, path, target.where)
    if not has_data_files(path):
        # Created but never written: nothing to compact or vacuum, and each step costs seconds of Spark jobs.
        return TableReport(target.owner, target.table, 0, 0, 0, 0, round(time.monotonic() - started, 3), target.where)
    delta = DeltaTable.forPath(spark, str(path))
    label = f"{target.owner}/{target.table}"

    compacted = [0]

    def optimize() -> None:
        builder = delta.optimize()
        result = (builder if target.where is None else builder.where(target.where)).executeCompaction().collect()
        compacted[0] = int(result[0]["metrics"]["numFilesRemoved"]) if result else 0

    def vacuum() -> None:
        delta.vacuum(float(retention_hours))

    retry_conflicts(optimize, label)
    checkpoint(spark, path)
    retry_conflicts(vacuum, label)
    files_after, bytes_after = stats(spark, path, target.where)
    report = TableReport(
        target.owner,
        target.table,
        files_before,
        files_after,
        bytes_before,
        bytes_after,
        round(time.monotonic() - started, 3),
        target.where,
        compacted[0],
    )
    log.info("lake.maintained", extra=asdict(report))
    return report


def maintain(
    spark: SparkSession,
    tenants: list[TenantNames],
    retention_hours: int = DEFAULT_RETENTION_HOURS,
    echo: Callable[[str], None] = progress,
    every_tenant: bool = False,
) -> list[TableReport]:
    """Maintain the tables of ``tenants`` (``targets``), one after the other (each step is already parallel inside
    Spark). ``every_tenant``: the selection is the whole lake, so the shared tables are maintained whole."""
    check_retention(retention_hours)
    reports = []
    for target in targets(tenants, every_tenant):
        scope = f" WHERE {target.where}" if target.where else ""
        echo(f"maintain {target.owner}/{target.table}{scope} ...")
        report = maintain_table(spark, target, retention_hours)
        if report is not None:
            echo(
                f"  files {report.files_before} -> {report.files_after}, "
                f"bytes {report.bytes_before} -> {report.bytes_after}, {report.seconds:.1f}s"
            )
            reports.append(report)
    return reports


def maintain_report(settings: Settings, tenant: str | None, retention_hours: int) -> dict[str, Any]:
    """The report of ``python -m processors.lake maintain`` (``processors.lake.main``): progress on stderr."""
    check_retention(retention_hours)  # before Spark starts: a refusal should be instant
    require_local_lake(settings, "metalake lake maintain")
    with connect(settings) as directory:
        tenants = directory.selected(tenant)
    if not tenants:
        progress(f"no tenants under {settings.lake_root}")
        return {"tables": []}
    spark = lake_session(settings, "metalake-lake-maintain")
    try:
        reports = maintain(spark, tenants, retention_hours, every_tenant=tenant is None)
    finally:
        spark.stop()
    return {"retention_hours": retention_hours, "tables": [asdict(r) for r in reports]}
