"""How long a tenant's Delta tables take to create and to check: delta-rs (``ensure_tables``, what the job, ``lake
init`` and dedicated provisioning run since 2026-11-30) against Spark's ``DeltaTable.createIfNotExists`` (what they
ran before), in one Spark session, round after round, on a scratch folder.

Each round makes a fresh dedicated tenant's layout (the eight tables of ``processors.enrichment.tables.TABLES``) for
each way, then times: creating them all (``new``), and asking again once they exist (``existing``: a job restart).
The first round pays the JVM's warm-up; it is reported apart, as a job's first start would see it.

    .stack/venv/bin/python bench/table_creation.py              # 5 rounds, about 2 minutes on 2 cores
    .stack/venv/bin/python bench/table_creation.py --rounds 3

Prints a markdown table: per way and case, the first round and the median of the others, and the ratio. The stack
need not run (a local Spark session: ``METALAKE_SPARK__JARS_DIR`` must name the Delta jars, as the stack's
``.stack/stack.env`` sets).
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

from delta.tables import DeltaTable
from pyspark.sql import SparkSession

from metalake.lake_uri import LakeRoot
from metalake.settings import load_settings
from processors.enrichment.session import build_spark
from processors.enrichment.settings import StreamSettings
from processors.enrichment.tables import Layout, TableSpec, ensure_tables
from tenants.naming import names_for

Timings = dict[str, list[float]]


def spark_create(spark: SparkSession, tables: Sequence[tuple[TableSpec, LakeRoot]]) -> None:
    """The way before: one ``createIfNotExists`` per table (a JVM commit each), then its schema read back."""
    for spec, path in tables:
        builder = DeltaTable.createIfNotExists(spark).location(str(path)).addColumns(spec.schema)
        if spec.partition_by:
            builder = builder.partitionedBy(*spec.partition_by)
        builder.execute().toDF().schema  # noqa: B018 - the old code compared it with the spec


def _timed(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def _creator(way: str, spark: SparkSession, tables: Sequence[tuple[TableSpec, LakeRoot]]) -> Callable[[], object]:
    if way == "spark":
        return lambda: spark_create(spark, tables)
    return lambda: ensure_tables(tables, None)


def one_round(spark: SparkSession, scratch: Path, timings: Timings) -> None:
    for way in ("spark", "delta-rs"):
        root = Path(tempfile.mkdtemp(dir=scratch))
        create = _creator(way, spark, Layout(root, names_for("bench", root, dedicated=True)).tables())
        timings[f"{way} new"].append(_timed(create))
        timings[f"{way} existing"].append(_timed(create))


def report(timings: Timings, rounds: int) -> str:
    lines = [
        f"{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} cores, {rounds} rounds",
        "",
        "| way | case | first round (s) | median of the others (s) | ratio to Spark (median) |",
        "|---|---|---|---|---|",
    ]
    for key, values in timings.items():
        way, case = key.split(" ")
        median = statistics.median(values[1:] or values)
        base = statistics.median(timings[f"spark {case}"][1:] or timings[f"spark {case}"])
        lines.append(f"| {way} | {case} | {values[0]:.2f} | {median:.2f} | {median / base:.3f} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=5, help="rounds (the first is reported apart)")
    args = parser.parse_args()
    settings = load_settings(StreamSettings)
    spark = build_spark(settings, "bench-table-creation")
    scratch = Path(tempfile.mkdtemp(prefix="table-creation-"))
    timings: Timings = {k: [] for k in ("spark new", "spark existing", "delta-rs new", "delta-rs existing")}
    try:
        for i in range(args.rounds):
            one_round(spark, scratch, timings)
            print(f"round {i + 1}/{args.rounds}: " + ", ".join(f"{k} {v[-1]:.2f}s" for k, v in timings.items()))
    finally:
        spark.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(report(timings, args.rounds))


if __name__ == "__main__":
    main()
