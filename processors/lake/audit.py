"""The tenant's ``audit`` Delta table: who did what to which target, when, with what result.

A row never holds an erased value: the target is a sha256 hash, and ``counts`` holds numbers only. Rows are appends,
so concurrent writers never conflict with each other.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from datetime import UTC, datetime

from delta.tables import DeltaTable
from pyspark.sql import SparkSession
from pyspark.sql.types import StringType, StructField, StructType, TimestampType

from metalake.settings import Settings
from processors.enrichment.commits import retry_conflicts
from tenants.lake_catalog import register_tables
from tenants.naming import TenantNames

log = logging.getLogger(__name__)

AUDIT = StructType(
    [
        StructField("at", TimestampType(), True),
        StructField("actor", StringType(), True),
        StructField("action", StringType(), True),
        StructField("target_hash", StringType(), True),
        StructField("result", StringType(), True),
        StructField("counts", StringType(), True),
    ]
)


def ensure_audit_table(spark: SparkSession, settings: Settings, names: TenantNames) -> None:
    """Create the table if missing and register it in Trino (best effort: Trino down must not block an erase)."""
    path = str(names.table("audit").path)

    def create() -> None:
        DeltaTable.createIfNotExists(spark).location(path).addColumns(AUDIT).execute()

    retry_conflicts(create, "audit")
    try:
        register_tables(settings, names, ("audit",))
    except Exception as exc:  # noqa: BLE001 - the audit row matters, the Trino view of it can come later
        log.warning("lake.audit_register_failed", extra={"error": type(exc).__name__})


def record(
    spark: SparkSession,
    names: TenantNames,
    actor: str,
    action: str,
    target_hash: str,
    result: str,
    counts: Mapping[str, int],
) -> None:
    """Append one audit row. ``counts`` must hold numbers only (checked: it is the one free-form column)."""
    if not all(isinstance(v, int) for v in counts.values()):
        raise TypeError("audit counts must be integers")
    row = (datetime.now(UTC), actor, action, target_hash, result, json.dumps(dict(counts), sort_keys=True))
    frame = spark.createDataFrame([row], AUDIT)
    path = str(names.table("audit").path)
    retry_conflicts(lambda: frame.write.format("delta").mode("append").save(path), "audit")
