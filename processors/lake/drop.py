"""Tenant deletion in the lake: every Delta row of the tenant leaves the store; other tenants' rows stay.

A pooled tenant: DELETE its rows (its predicate: bucket and id) from every shared table that holds any, then purge
the files those DELETEs removed (``purge``: VACUUM with 0 hours, touched tables only, as the GDPR erase does; on a
shared table this ends time travel to earlier versions for every tenant of the table). Then its lake folder goes:
its ``audit`` table, and tables the old layout left there. A dedicated tenant: its whole lake folder goes (its
tables and ``audit``); its rows in the shared tables too, should any be left from a time it was pooled.

On S3 (``single_writer``): each shared table's DELETE and purge hold the table's writer lease, as the erase's do (the
pooled job's next batch on it waits); the folder is a key prefix, whose objects are listed a page at a time and
deleted (DeleteObjects, ``metalake.s3``), each Delta log before its table's data files, while holding the writer
leases of the tenant's own tables (a maintain or erase of the tenant that waits for them then finds no table, not half
of one).

Idempotent and quiet about absence: a tenant with nothing left exits 0 with zero counts, so a deprovisioning that
crashed midway can run it again (what a crashed deletion of a prefix left is deleted by the next run). MongoDB,
Trino, topics and checkpoints are the deprovisioning's other steps (the API's); stop what writes the tenant first
(its ingest, a dedicated job), or new rows arrive after the drop.

    python -m processors.lake drop --tenant T
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

from pyspark.sql import SparkSession

from control.audit import StorageOptions
from metalake.lake_uri import S3Path
from metalake.mongo import mongo_client
from metalake.s3 import lake_s3_client, lake_storage_options
from processors.enrichment.single_writer import NoWriterLeases, WriterLeases
from processors.enrichment.tables import TABLES
from processors.lake.discover import connect, has_pooled_rows, is_table, shared_place
from processors.lake.purge import (
    UNTRACKED_GRACE_S,
    count_rows,
    delete_rows,
    purge_removed,
    purge_untracked,
    relative,
)
from processors.lake.runner import progress
from processors.lake.settings import LakeWorkerSettings
from processors.lake.sparkio import is_delta, lake_session
from tenants.naming import CONTROL_DATABASE, POOLED_TABLES, LakeTable, TenantNames, pooled_table_path

# The tables a Spark writer may commit to under a tenant's folder (a dedicated tenant's, or what the old layout left
# a pooled one): their writer leases are held while the folder goes.
SPARK_TABLES = tuple(spec.name for spec in TABLES)
# Deleted first within each page of a folder's listing: a table whose log is gone is no table, while a log naming
# data files already deleted is a broken one.
LOG_FOLDER = "_delta_log"


class LakeObjects(Protocol):
    """What drop asks the object store of an S3 lake (``metalake.s3.S3Client``)."""

    def delete_prefix(self, bucket: str, prefix: str, first: Sequence[str] = ()) -> int: ...


@dataclass
class DropReport:
    """Counts only: rows deleted per shared table, the tables purged and the folder removed."""

    tenant: str
    tier: str
    shared_rows: dict[str, int] = field(default_factory=dict)
    vacuumed: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    # On S3: the objects deleted under the tenant's folder (0 on a rerun that found it gone).
    removed_objects: int = 0


def drop_shared_rows(  # noqa: PLR0913
    spark: SparkSession,
    names: TenantNames,
    report: DropReport,
    grace_s: float = UNTRACKED_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = progress,
    leases: WriterLeases | None = None,
) -> None:
    """DELETE the tenant's rows from each shared table holding any, then purge the files removed. On S3 each
    table's DELETE and purge hold its writer lease (``leases``)."""
    writers = leases or NoWriterLeases()
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
        with writers.holding([place.path]) as fence:
            delete_rows(spark, place, None, fence)
            purge_removed(spark, place.path, fence)
        touched.append(place)
        report.vacuumed.append(relative(names.lake_root, place.path))
    purge_untracked(spark, touched, grace_s, sleep, leases)


def remove_folder(
    names: TenantNames,
    report: DropReport,
    objects: LakeObjects | None = None,
    leases: WriterLeases | None = None,
) -> None:
    """The tenant's lake folder (a dedicated tenant's tables, any tenant's ``audit``, old-layout leftovers): a
    directory tree, or on S3 every object under its prefix (``objects``), holding its Spark tables' writer leases."""
    folder = names.lake_dir
    if isinstance(folder, S3Path):
        if objects is None:
            raise RuntimeError("a tenant's folder on S3 needs the lake's object store client (metalake.s3)")
        writers = leases or NoWriterLeases()
        with writers.holding([names.delta_path(t) for t in SPARK_TABLES]):
            deleted = objects.delete_prefix(folder.bucket, folder.folder, first=(LOG_FOLDER,))
        report.removed_objects = deleted
        if deleted:
            report.removed.append(relative(names.lake_root, folder))
        return
    if not folder.exists():
        return
    shutil.rmtree(folder)
    report.removed.append(relative(names.lake_root, folder))


def shared_tables(names: TenantNames, storage: StorageOptions = None) -> list[str]:
    """The shared tables that exist in the tenant's lake, read without Spark."""
    return [t for t in POOLED_TABLES if is_table(pooled_table_path(names.lake_root, t), storage)]


def needs_spark(names: TenantNames, storage: StorageOptions = None) -> bool:
    """Whether the shared tables hold rows of the tenant, read without Spark (delta-rs, its bucket's files): a
    tenant deleted before any event of it landed (most deletions right after a provisioning) starts no JVM. Every
    state row comes from an event committed to ``events`` earlier in the same batch, and dead letters are in
    ``_dlq``: no row there means no row anywhere."""
    return has_pooled_rows(names, storage)


def drop(  # noqa: PLR0913
    spark: SparkSession | None,
    names: TenantNames,
    grace_s: float = UNTRACKED_GRACE_S,
    sleep: Callable[[float], None] = time.sleep,
    echo: Callable[[str], None] = progress,
    leases: WriterLeases | None = None,
    objects: LakeObjects | None = None,
    storage: StorageOptions = None,
) -> DropReport:
    """Delete every Delta row of the tenant: shared tables first (the folder holds the audit trail of a failure
    until then), then its folder. ``spark`` may be None when ``needs_spark`` is false."""
    report = DropReport(names.tenant_id, "dedicated" if names.dedicated else "pooled")
    if spark is not None:
        drop_shared_rows(spark, names, report, grace_s, sleep, echo, leases)
    else:
        # The same report as a Spark pass that found nothing: a zero for every shared table that exists.
        report.shared_rows = dict.fromkeys(shared_tables(names, storage), 0)
    echo(f"drop {names.tenant_id}: removing {names.lake_dir} ...")
    remove_folder(names, report, objects, leases)
    return report


def drop_report(settings: LakeWorkerSettings, tenant: str, spark: SparkSession | None = None) -> dict[str, Any]:
    """The report of ``python -m processors.lake drop`` (``processors.lake.main``): progress on stderr. With
    ``spark``, that session is used when Spark is needed (and left running) instead of one of its own."""
    with connect(settings) as directory:
        names = directory.resolve(tenant)  # no existence check: dropping what is gone is done
    storage = lake_storage_options(settings)
    session = (spark or lake_session(settings, "metalake-lake-drop")) if needs_spark(names, storage) else None
    # On S3 every Spark commit and the folder's deletion hold writer leases (``single_writer``); a local lake none.
    mongo = mongo_client(settings) if settings.lake_on_s3 else None
    try:
        leases = WriterLeases.in_database(mongo[CONTROL_DATABASE], settings.lake.writer_lease) if mongo else None
        report = drop(session, names, leases=leases, objects=lake_s3_client(settings), storage=storage)
    finally:
        if mongo is not None:
            mongo.close()
        if session is not None and spark is None:
            session.stop()
    return asdict(report)
