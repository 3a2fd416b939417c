"""Table maintenance per tenant: OPTIMIZE (compaction of small files), a checkpoint, and VACUUM.

Safe while the stream runs: compaction only rewrites data (``dataChange = false``), so a concurrent blind append
never conflicts with it; a concurrent MERGE that rewrote a file being compacted makes one side lose, and this side
retries (``retry_conflicts``, the job's own policy). VACUUM keeps every file removed less than ``retention_hours``
ago, and never less than Delta's safety minimum (168 h), so readers of older snapshots (the job, Trino) keep working.

    python -m processors.lake.maintain [--tenant T] [--retention-hours H]
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from metalake.settings import get_settings
from processors.enrichment.tables import TABLES
from processors.enrichment.writer import retry_conflicts
from processors.lake.discover import selected_tenants
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress, run
from processors.lake.sparkio import is_delta, lake_session, table_stats
from tenants.naming import TenantNames

log = logging.getLogger("processors.lake.maintain")  # not __main__ under python -m

DEFAULT_RETENTION_HOURS = 168
# Delta's own default (delta.deletedFileRetentionDuration = 1 week): below it a reader of a recent snapshot, such as
# a streaming batch in flight, could find its files gone.
MIN_RETENTION_HOURS = 168
# The job's tables, and the audit table erase keeps.
MAINTAINED = (*(spec.name for spec in TABLES), "audit")


@dataclass(frozen=True)
class TableReport:
    tenant: str
    table: str
    files_before: int
    files_after: int
    bytes_before: int
    bytes_after: int
    seconds: float


def check_retention(hours: int) -> int:
    """``hours`` if it is safe; LakeUsageError otherwise (the erase command is the only way below the minimum)."""
    if hours < MIN_RETENTION_HOURS:
        raise LakeUsageError(
            f"--retention-hours {hours} is below Delta's safety minimum of {MIN_RETENTION_HOURS} h: readers of "
            "recent snapshots (the streaming job, Trino) could lose files"
        )
    return hours


def has_data_files(path: Path) -> bool:
    """Whether any parquet file exists under the table folder (live or awaiting VACUUM)."""
    return any(p.name.endswith(".parquet") for p in path.rglob("*.parquet") if "_delta_log" not in p.parts)


def checkpoint(spark: SparkSession, path: Path) -> None:
    """Write a checkpoint of the latest version, so readers replay at most a few JSON commits. Delta's Python API has
    no call for it; the JVM one writes a file for an existing version and commits nothing, so it cannot conflict."""
    jvm: Any = spark.sparkContext._jvm  # noqa: SLF001 - py4j gateway; PySpark exposes no public handle
    jvm.org.apache.spark.sql.delta.DeltaLog.forTable(spark._jsparkSession, str(path)).checkpoint()  # noqa: SLF001


def maintain_table(spark: SparkSession, names: TenantNames, table: str, retention_hours: int) -> TableReport | None:
    """OPTIMIZE, checkpoint and VACUUM one table; None when the tenant has no such table (nothing written yet)."""
    path = names.delta_path(table)
    if not is_delta(spark, path):
        return None
    started = time.monotonic()
    files_before, bytes_before = table_stats(spark, path)
    if not has_data_files(path):
        # Created but never written: nothing to compact or vacuum, and each step costs seconds of Spark jobs.
        return TableReport(names.tenant_id, table, 0, 0, 0, 0, round(time.monotonic() - started, 3))
    delta = DeltaTable.forPath(spark, str(path))
    label = f"{names.tenant_id}/{table}"

    def optimize() -> None:
        delta.optimize().executeCompaction()

    def vacuum() -> None:
        delta.vacuum(float(retention_hours))

    retry_conflicts(optimize, label)
    checkpoint(spark, path)
    retry_conflicts(vacuum, label)
    files_after, bytes_after = table_stats(spark, path)
    report = TableReport(
        names.tenant_id,
        table,
        files_before,
        files_after,
        bytes_before,
        bytes_after,
        round(time.monotonic() - started, 3),
    )
    log.info("lake.maintained", extra=asdict(report))
    return report


def maintain(
    spark: SparkSession,
    tenants: list[TenantNames],
    retention_hours: int = DEFAULT_RETENTION_HOURS,
    echo: Callable[[str], None] = progress,
) -> list[TableReport]:
    """Maintain every table of each tenant, one after the other (each step is already parallel inside Spark)."""
    check_retention(retention_hours)
    reports = []
    for names in tenants:
        for table in MAINTAINED:
            echo(f"maintain {names.tenant_id}/{table} ...")
            report = maintain_table(spark, names, table, retention_hours)
            if report is not None:
                echo(
                    f"  files {report.files_before} -> {report.files_after}, "
                    f"bytes {report.bytes_before} -> {report.bytes_after}, {report.seconds:.1f}s"
                )
                reports.append(report)
    return reports


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m processors.lake.maintain", description=__doc__.split("\n")[0])
    parser.add_argument("--tenant", help="Only this tenant (default: every tenant under the lake root).")
    parser.add_argument(
        "--retention-hours",
        type=int,
        default=DEFAULT_RETENTION_HOURS,
        help=f"VACUUM keeps files removed less than this long ago (default and minimum {MIN_RETENTION_HOURS}).",
    )
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = get_settings()

    def body() -> dict[str, Any]:
        check_retention(args.retention_hours)  # before Spark starts: a refusal should be instant
        tenants = selected_tenants(args.tenant, settings.lake_root)
        if not tenants:
            progress(f"no tenants under {settings.lake_root}")
            return {"tables": []}
        spark = lake_session(settings, "metalake-lake-maintain")
        try:
            reports = maintain(spark, tenants, args.retention_hours)
        finally:
            spark.stop()
        return {"retention_hours": args.retention_hours, "tables": [asdict(r) for r in reports]}

    return run("maintain", body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
