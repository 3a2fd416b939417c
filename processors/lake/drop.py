"""Tenant deletion in the lake: every Delta row of the tenant leaves the disk; other tenants' rows stay.

A pooled tenant: DELETE its rows (its predicate: bucket and id) from every shared table that holds any, then purge
the files those DELETEs removed (``purge``: VACUUM with 0 hours, touched tables only, as the GDPR erase does; on a
shared table this ends time travel to earlier versions for every tenant of the table). Then its lake folder goes:
its ``audit`` table, and tables the old layout left there. A dedicated tenant: its whole lake folder goes (its
tables and ``audit``); its rows in the shared tables too, should any be left from a time it was pooled.

Idempotent and quiet about absence: a tenant with nothing left exits 0 with zero counts, so a deprovisioning that
crashed midway can run it again. MongoDB, Trino, topics and checkpoints are the deprovisioning's other steps (the
API's); stop what writes the tenant first (its ingest, a dedicated job), or new rows arrive after the drop.

    python -m processors.lake drop --tenant T
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from pyspark.sql import SparkSession

from metalake.lake_uri import local_path
from metalake.settings import Settings
from processors.lake.discover import connect, has_pooled_rows, shared_place
from processors.lake.errors import require_local_lake
from processors.lake.purge import (
    UNTRACKED_GRACE_S,
    count_rows,
    delete_rows,
    purge_removed,
    purge_untracked,
    relative,
)
from processors.lake.runner import progress
from processors.lake.sparkio import is_delta, lake_session
from tenants.naming import POOLED_TABLES, LakeTable, TenantNames, pooled_table_path


@dataclass
class DropReport:
    """Counts only: rows deleted per shared table, the tables purged and the folder removed."""

    tenant: str
    tier: str
    shared_rows: dict[str, int] = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)


def drop_shared_rows(
    spark: SparkSession,
    names: TenantNames,
    report: DropReport,
    grace_s: float = UNTRACKED_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = progress,
) -> None:
    """DELETE the tenant's rows from each shared table holding any, then purge the files removed."""
    touched: list[LakeTable] = []
    for table in POOLED_TABLES:
        place = shared_place(names, table)
        if not is_delta(spark, place.path):
            continue
        rows = count_rows(spark, place.path, place.predicate)
        report.shared_rows[table] = rows
        if rows == 0:
            continue  # no empty commit, and no purge that would cost the other tenants' time travel for nothing
        echo(f"drop {names.tenant_id}: deleting {rows} rows from {relative(names.lake_root, place.path)} ...")
        delete_rows(spark, place, None)
        purge_removed(spark, place.path)
        touched.append(place)
        report.vacuumed.append(relative(names.lake_root, place.path))
    purge_untracked(spark, touched, grace_s, sleep)


def remove_folder(names: TenantNames, report: DropReport) -> None:
    """The tenant's lake folder (a dedicated tenant's tables, any tenant's ``audit``, old-layout leftovers)."""
    folder = local_path(names.lake_dir, "removing a tenant's lake folder")
    if not folder.exists():
        return
    shutil.rmtree(folder)
    report.removed.append(relative(names.lake_root, names.lake_dir))


def needs_spark(names: TenantNames) -> bool:
    """Whether the shared tables hold rows of the tenant, read without Spark (delta-rs, its bucket's files): a
    tenant deleted before any event of it landed (most deletions right after a provisioning) starts no JVM. Every
    state row comes from an event committed to ``events`` earlier in the same batch, and dead letters are in
    ``_dlq``: no row there means no row anywhere."""
    root = local_path(names.lake_root, "metalake lake drop")
    exists = any((pooled_table_path(root, t) / "_delta_log").is_dir() for t in POOLED_TABLES)
    return exists and has_pooled_rows(names)


def drop(
    spark: SparkSession | None,
    names: TenantNames,
    grace_s: float = UNTRACKED_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = progress,
) -> DropReport:
    """Delete every Delta row of the tenant: shared tables first (the folder holds the audit trail of a failure
    until then), then its folder. ``spark`` may be None when ``needs_spark`` is false."""
    report = DropReport(names.tenant_id, "dedicated" if names.dedicated else "pooled")
    if spark is not None:
        drop_shared_rows(spark, names, report, grace_s, sleep, echo)
    else:
        # The same report as a Spark pass that found nothing: a zero for every shared table that exists.
        root = local_path(names.lake_root, "metalake lake drop")
        report.shared_rows = {t: 0 for t in POOLED_TABLES if (pooled_table_path(root, t) / "_delta_log").is_dir()}
    echo(f"drop {names.tenant_id}: removing {names.lake_dir} ...")
    remove_folder(names, report)
    return report


def drop_report(settings: Settings, tenant: str) -> dict[str, Any]:
    """The report of ``python -m processors.lake drop`` (``processors.lake.main``): progress on stderr."""
    require_local_lake(settings, "metalake lake drop")
    with connect(settings) as directory:
        names = directory.resolve(tenant)  # no existence check: dropping what is gone is done
    spark = lake_session(settings, "metalake-lake-drop") if needs_spark(names) else None
    try:
        report = drop(spark, names)
    finally:
        if spark is not None:
            spark.stop()
    return asdict(report)
