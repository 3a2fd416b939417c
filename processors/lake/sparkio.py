"""The Spark side shared by the lake commands: one session, table statistics, rows read with UTC timestamps."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import TimestampType

from metalake.lake_uri import LakeRoot, spark_uri
from processors.enrichment.session import build_spark
from processors.lake.settings import LakeWorkerSettings

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# VACUUM lists files with this many tasks; Spark's default (10 000) turns a small table's vacuum into ~40 s of empty
# tasks on two cores.
LISTING_PARALLELISM = "8"


def lake_session(settings: LakeWorkerSettings, app_name: str) -> SparkSession:
    """The job session (``build_spark``: jars, Delta, Trino-compatible table defaults) tuned for maintenance."""
    spark = build_spark(settings, app_name)
    spark.conf.set("spark.sql.sources.parallelPartitionDiscovery.parallelism", LISTING_PARALLELISM)
    return spark


def is_delta(spark: SparkSession, path: LakeRoot) -> bool:
    # A local folder that is not there is answered without the JVM; on S3 Delta looks for the log itself.
    if isinstance(path, Path) and not path.is_dir():
        return False
    return bool(DeltaTable.isDeltaTable(spark, spark_uri(path)))


@dataclass(frozen=True)
class DataFile:
    uri: str
    size: int
    modified: float  # seconds since the epoch


def data_files(spark: SparkSession, table: LakeRoot) -> list[DataFile]:
    """Every parquet file under the table's folder (live or awaiting VACUUM), listed through Hadoop's file system
    (s3a on S3): what a lake command that cannot list a local folder needs to see."""
    jvm: Any = spark.sparkContext._jvm  # noqa: SLF001 - py4j gateway; PySpark exposes no public handle
    root = jvm.org.apache.hadoop.fs.Path(spark_uri(table))
    fs = root.getFileSystem(spark._jsc.hadoopConfiguration())  # noqa: SLF001
    if not fs.exists(root):
        return []
    found = fs.listFiles(root, True)
    out = []
    while found.hasNext():
        status = found.next()
        uri = str(status.getPath().toString())
        if uri.endswith(".parquet") and "/_delta_log/" not in uri:
            out.append(DataFile(uri, int(status.getLen()), int(status.getModificationTime()) / 1000))
    return out


def table_stats(spark: SparkSession, path: LakeRoot) -> tuple[int, int]:
    """(files, bytes) of the table's current snapshot (live files only, not what VACUUM has yet to remove)."""
    detail = spark.sql(f"DESCRIBE DETAIL delta.`{spark_uri(path)}`").collect()[0]
    return int(detail["numFiles"]), int(detail["sizeInBytes"])


def from_micros(value: int | None) -> datetime | None:
    """Microseconds since the epoch -> an aware UTC datetime (PySpark would give a naive local-time one)."""
    return None if value is None else EPOCH + timedelta(microseconds=value)


def read_rows(
    spark: SparkSession, path: LakeRoot, columns: Sequence[str], where: str | None = None
) -> Iterator[dict[str, Any]]:
    """The table's rows (those matching ``where``: a tenant's of a shared table) as dicts of ``columns``, streamed to
    the driver partition by partition. Timestamps are aware UTC datetimes whatever the machine's time zone, so they
    compare and store like the job's own values."""
    frame = spark.read.format("delta").load(spark_uri(path))
    if where is not None:
        frame = frame.where(where)
    stamps = {f.name for f in frame.schema.fields if isinstance(f.dataType, TimestampType)}
    selected = [F.unix_micros(F.col(c)).alias(c) if c in stamps else F.col(c) for c in columns]
    for row in frame.select(*selected).toLocalIterator():
        out = row.asDict(recursive=True)
        for c in stamps & set(columns):
            out[c] = from_micros(out[c])
        yield out
