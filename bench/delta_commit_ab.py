"""A/B of Delta commit settings on the lake query's own batch code (issue 10, item 4).

Each variant gets fresh pooled tables of its own (``LakeWriter`` over a ``Layout`` in a scratch lake root), seeded
with one batch of asset upserts over ``--tenants`` tenants; then, round after round, every variant writes the same
kind of batch (``--batch`` updates of existing assets spread over all tenants, so every bucket is touched), in a
rotating order, and the batch's wall time and step timings (the job's own ``enrichment.lake_batch_done`` record) are
kept. No Kafka: the batches are Kafka-shaped DataFrames made from CloudEvents, so the parse, append, fold and MERGE
are exactly the job's.

Variants (each alone against ``baseline``, the job's settings):
- ``dv``: deletion vectors on every table (``delta.enableDeletionVectors``): MERGE marks rows instead of
  rewriting the files it touches. Trino 476 reads such tables (checked on the local stack, docs/benchmarks.md).
- ``ckpt100``: ``delta.checkpointInterval`` 100 instead of 10 (a checkpoint is written synchronously by a commit).
- ``stats_keys``: statistics only for the tenant and key columns (``delta.dataSkippingStatsColumns``) instead of
  the first 32 columns (events carry the JSON ``data``).

    .stack/venv/bin/python bench/delta_commit_ab.py                      # ~10 min on 2 quiet cores
    .stack/venv/bin/python bench/delta_commit_ab.py --rounds 3 --variants baseline,dv   # smoke

Prints a markdown table: per variant the median batch seconds, the ratio to the baseline, and the median of each
step. The stack need not run (Spark only).
"""

from __future__ import annotations

import argparse
import logging
import platform
import secrets
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from metalake.events import new_event
from metalake.settings import load_settings
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from processors.enrichment.lake import LakeWriter
from processors.enrichment.session import build_spark
from processors.enrichment.tables import Layout, ensure_tables

KAFKA_SCHEMA = StructType(
    [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField(
            "headers", ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))
        ),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
    ]
)
STATE_TABLES = ("assets", "classifications", "lineage_edges", "incidents", "propagated_tags")
STATS_KEYS = {
    "events": "tenant_id,event_id",
    "_dlq": "tenant_id",
    "assets": "tenant_id,urn",
    "classifications": "tenant_id,urn,tag",
    "lineage_edges": "tenant_id,upstream,urn",
    "incidents": "tenant_id,incident_id",
    "propagated_tags": "tenant_id,urn,tag,origin",
}
VARIANTS: dict[str, dict[str, dict[str, str]]] = {
    "baseline": {},
    "dv": {t: {"delta.enableDeletionVectors": "true"} for t in ("events", "_dlq", *STATE_TABLES)},
    "ckpt100": {t: {"delta.checkpointInterval": "100"} for t in ("events", "_dlq", *STATE_TABLES)},
    "stats_keys": {t: {"delta.dataSkippingStatsColumns": cols} for t, cols in STATS_KEYS.items()},
}


class _BatchLog(logging.Handler):
    """Keeps the ``enrichment.lake_batch_done`` records' fields."""

    def __init__(self) -> None:
        super().__init__(logging.INFO)
        self.batches: list[dict[str, Any]] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.getMessage() == "enrichment.lake_batch_done":
            self.batches.append({"seconds": record.__dict__["seconds"], "steps": record.__dict__["steps"]})


def kafka_batch(
    spark: SparkSession, tenants: list[str], assets_per_tenant: int, size: int, version: int, offset: int
) -> DataFrame:
    """``size`` asset upserts spread over the tenants (round robin), each a new ``version`` of an existing asset."""
    rows = []
    now = datetime.now(UTC)
    for i in range(size):
        tenant = tenants[i % len(tenants)]
        name = f"t{(i // len(tenants)) % assets_per_tenant}"
        data = {"urn": asset_urn("bench", "local", "db", "public", name), "version": version, "kind": "table"}
        event = new_event("io.metalake.asset.upserted.v1", tenant, {**data, "name": name}, source="/bench/ab")
        headers = [{"key": k, "value": v} for k, v in event.headers()]
        rows.append((event.key, event.value(), headers, "bench.ab", i % 2, offset + i, now))
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def prepare(spark: SparkSession, settings: Settings, root: Path, variant: str) -> LakeWriter:
    layout = Layout(root / variant)
    ensure_tables(layout.tables(), None)
    for table, properties in VARIANTS[variant].items():
        pairs = ", ".join(f"'{k}' = '{v}'" for k, v in properties.items())
        spark.sql(f"ALTER TABLE delta.`{layout.path(table)}` SET TBLPROPERTIES ({pairs})")
    writer = LakeWriter(settings, f"ab-{variant}", layout)
    writer.prepare(spark)
    return writer


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--variants", default=",".join(VARIANTS), help=f"comma-separated, of {', '.join(VARIANTS)}")
    parser.add_argument("--tenants", type=int, default=50, help="pooled tenants (default 50: every bucket touched)")
    parser.add_argument("--assets", type=int, default=200, help="assets per tenant seeded (default 200)")
    parser.add_argument("--batch", type=int, default=500, help="updates per measured batch (default 500)")
    parser.add_argument("--rounds", type=int, default=12, help="measured batches per variant (default 12)")
    args = parser.parse_args(argv)
    variants = args.variants.split(",")
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        parser.error(f"unknown variants: {', '.join(unknown)}")

    settings = load_settings(Settings)
    run = secrets.token_hex(3)
    root = settings.local_stack_dir / "bench" / f"delta-ab-{run}"
    spark = build_spark(settings, f"delta-ab-{run}")
    captured = _BatchLog()
    logging.getLogger("processors.enrichment.lake").addHandler(captured)
    logging.getLogger("processors.enrichment.lake").setLevel(logging.INFO)
    tenants = [f"ab{run}-{i}" for i in range(args.tenants)]
    print(f"run {run}: variants {variants}, {args.tenants} tenants x {args.assets} assets, batches of {args.batch}")
    try:
        writers = {v: prepare(spark, settings, root, v) for v in variants}
        seed = kafka_batch(spark, tenants, args.assets, args.tenants * args.assets, 1, 0)
        for v in variants:
            started = time.monotonic()
            writers[v](seed, 0)
            print(f"  seeded {v} in {time.monotonic() - started:.1f}s", flush=True)
        results: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
        for r in range(1, args.rounds + 1):
            batch = kafka_batch(spark, tenants, args.assets, args.batch, 1 + r, r * args.batch).cache()
            batch.count()
            order = variants[r % len(variants) :] + variants[: r % len(variants)]
            for v in order:
                writers[v](batch, r)
                results[v].append(captured.batches[-1])
            batch.unpersist()
            line = ", ".join(f"{v} {results[v][-1]['seconds']:.2f}s" for v in variants)
            print(f"  round {r}/{args.rounds}: {line}", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)

    base = statistics.median(b["seconds"] for b in results[variants[0]])
    print(
        f"\n{datetime.now(UTC):%Y-%m-%d}, {platform.node()}, python {sys.version.split()[0]}: "
        f"median of {args.rounds} batches, ratio to {variants[0]}"
    )
    print("| variant | batch s (median) | ratio | steps (median s) |")
    print("|---|---|---|---|")
    for v in variants:
        median = statistics.median(b["seconds"] for b in results[v])
        names = sorted({s for b in results[v] for s in b["steps"]})
        steps = ", ".join(f"{s} {statistics.median(b['steps'].get(s, 0.0) for b in results[v]):.2f}" for s in names)
        print(f"| {v} | {median:.2f} | {median / base:.2f} | {steps} |")
    return 0


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    sys.exit(main())
