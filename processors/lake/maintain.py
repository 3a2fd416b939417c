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

On S3 (``single_writer``): each Spark table is maintained holding its writer lease, so the streaming job's batches
wait for it instead of racing it (Spark's S3 log store is single-driver); the ``audit`` tables, which delta-rs writers
append to without a lease, are maintained with delta-rs instead (conditional PUTs: safe beside them).

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

import pyarrow as pa
from delta.tables import DeltaTable
from deltalake import DeltaTable as RsDeltaTable
from deltalake.exceptions import TableNotFoundError
from pyspark.sql import SparkSession

from metalake.lake_uri import LakeRoot, S3Path, delta_rs_uri, local_path, spark_uri
from metalake.mongo import mongo_client
from metalake.s3 import lake_storage_options
from processors.enrichment.commits import retry_conflicts
from processors.enrichment.single_writer import Fence, NoWriterLeases, WriterLeases
from processors.enrichment.tables import TABLES
from processors.lake.discover import connect
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress
from processors.lake.settings import LakeWorkerSettings
from processors.lake.sparkio import data_files, is_delta, lake_session, table_stats
from tenants.naming import (
    CONTROL_DATABASE,
    POOLED_DIR,
    POOLED_TABLES,
    TenantNames,
    pooled_table_path,
    tenant_bucket,
    unrouted_lake_dir,
)

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


def has_data_files(spark: SparkSession, table: LakeRoot) -> bool:
    """Whether any parquet file exists under the table folder (live or awaiting VACUUM)."""
    if isinstance(table, S3Path):
        return bool(data_files(spark, table))
    path = local_path(table, "metalake lake maintain")
    return any(p.name.endswith(".parquet") for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def stats(spark: SparkSession, path: LakeRoot, where: str | None) -> tuple[int, int]:
    """(files, bytes) of the live files of the table, or of its partitions matching ``where``."""
    if where is None:
        return table_stats(spark, path)
    if isinstance(path, S3Path):
        live = {unquote(f) for f in spark.read.format("delta").load(spark_uri(path)).where(where).inputFiles()}
        sizes = [f.size for f in data_files(spark, path) if unquote(f.uri) in live]
        return len(live), sum(sizes)
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


def maintain_table(
    spark: SparkSession, target: Target, retention_hours: int, leases: WriterLeases | None = None
) -> TableReport | None:
    """OPTIMIZE (within ``target.where``), checkpoint and VACUUM one table; None when it does not exist. On S3 the
    table's writer lease is held meanwhile (``leases``; the streaming job's next batch waits for it)."""
    with (leases or NoWriterLeases()).holding([target.path]) as fence:
        return _maintain_table(spark, target, retention_hours, fence)


def _maintain_table(spark: SparkSession, target: Target, retention_hours: int, fence: Fence) -> TableReport | None:
    path = target.path
    if not is_delta(spark, path):
        return None
    started = time.monotonic()
    files_before, bytes_before = stats(spark, path, target.where)
    if not has_data_files(spark, path):
        # Created but never written: nothing to compact or vacuum, and each step costs seconds of Spark jobs.
        return TableReport(target.owner, target.table, 0, 0, 0, 0, round(time.monotonic() - started, 3), target.where)
    delta = DeltaTable.forPath(spark, str(path))
    label = f"{target.owner}/{target.table}"

    compacted = [0]

    def optimize() -> None:
        fence.check()
        builder = delta.optimize()
        result = (builder if target.where is None else builder.where(target.where)).executeCompaction().collect()
        compacted[0] = int(result[0]["metrics"]["numFilesRemoved"]) if result else 0

    def vacuum() -> None:
        fence.check()
        delta.vacuum(float(retention_hours))

    retry_conflicts(optimize, label)
    fence.check()
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


def maintain_delta_rs(target: Target, retention_hours: int, storage: dict[str, str] | None) -> TableReport | None:
    """Compact, checkpoint and VACUUM a table delta-rs writers share (``audit`` on S3) with delta-rs itself: its
    commits are conditional PUTs, safe beside the API's and workers' appends, where a Spark commit on S3 could
    overwrite one of theirs (Spark's S3 log store is single-driver, and those writers take no lease)."""
    uri = delta_rs_uri(target.path)
    try:
        table = RsDeltaTable(uri, storage_options=storage)
    except TableNotFoundError:
        return None
    started = time.monotonic()

    def files() -> tuple[int, int]:
        sizes = pa.table(table.get_add_actions(flatten=True)).column("size_bytes").to_pylist()
        return len(sizes), int(sum(sizes))

    files_before, bytes_before = files()
    compacted = int(table.optimize.compact().get("numFilesRemoved", 0)) if files_before else 0
    table.create_checkpoint()
    table.vacuum(retention_hours=retention_hours, dry_run=False, enforce_retention_duration=False)
    files_after, bytes_after = files()
    report = TableReport(
        target.owner,
        target.table,
        files_before,
        files_after,
        bytes_before,
        bytes_after,
        round(time.monotonic() - started, 3),
        target.where,
        compacted,
    )
    log.info("lake.maintained", extra=asdict(report))
    return report


def maintain(  # noqa: PLR0913
    spark: SparkSession,
    tenants: list[TenantNames],
    retention_hours: int = DEFAULT_RETENTION_HOURS,
    echo: Callable[[str], None] = progress,
    every_tenant: bool = False,
    leases: WriterLeases | None = None,
    storage: dict[str, str] | None = None,
) -> list[TableReport]:
    """Maintain the tables of ``tenants`` (``targets``), one after the other (each step is already parallel inside
    Spark). ``every_tenant``: the selection is the whole lake, so the shared tables are maintained whole."""
    check_retention(retention_hours)
    reports = []
    for target in targets(tenants, every_tenant):
        scope = f" WHERE {target.where}" if target.where else ""
        echo(f"maintain {target.owner}/{target.table}{scope} ...")
        if target.table == "audit" and isinstance(target.path, S3Path):
            report = maintain_delta_rs(target, retention_hours, storage)
        else:
            report = maintain_table(spark, target, retention_hours, leases)
        if report is not None:
            echo(
                f"  files {report.files_before} -> {report.files_after}, "
                f"bytes {report.bytes_before} -> {report.bytes_after}, {report.seconds:.1f}s"
            )
            reports.append(report)
    return reports


def maintain_report(settings: LakeWorkerSettings, tenant: str | None, retention_hours: int) -> dict[str, Any]:
    """The report of ``python -m processors.lake maintain`` (``processors.lake.main``): progress on stderr."""
    check_retention(retention_hours)  # before Spark starts: a refusal should be instant
    with connect(settings) as directory:
        tenants = directory.selected(tenant)
    if not tenants:
        progress(f"no tenants under {settings.lake_root}")
        return {"tables": []}
    # On S3 each table is maintained holding its writer lease: the streaming job pauses that table's batch meanwhile.
    mongo = mongo_client(settings) if settings.lake_on_s3 else None
    leases = WriterLeases.in_database(mongo[CONTROL_DATABASE], settings.lake.writer_lease) if mongo else None
    spark = lake_session(settings, "metalake-lake-maintain")
    try:
        reports = maintain(
            spark,
            tenants,
            retention_hours,
            every_tenant=tenant is None,
            leases=leases,
            storage=lake_storage_options(settings),
        )
    finally:
        spark.stop()
        if mongo is not None:
            mongo.close()
    return {"retention_hours": retention_hours, "tables": [asdict(r) for r in reports]}
