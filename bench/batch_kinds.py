"""A lake batch touching every table kind against one touching only assets, commits one after the other against
side by side (issue 25, item 2).

Two ``LakeWriter``s over pooled tables of their own (a scratch lake root): ``sequential``
(``spark.commit_parallelism`` 1, the job's default) and ``concurrent`` (``--parallelism``, default 4).
Both are seeded with asset upserts over ``--tenants`` tenants, then warmed up with one batch of every kind; then,
round after round, each writer takes the same two batches in a rotating order:

- ``assets``: ``--batch`` asset upserts (new versions of seeded assets, none with incidents): events append, assets
  MERGE.
- ``all``: as many events over every kind: asset upserts, classifications, lineage edges, incidents (on seeded
  assets, so the health MERGE runs), propagated tags, asset edits, one invalid event of a tenant (``_dlq``) and one
  record of no tenant (the unrouted dead letters): every table the lake query writes.

No Kafka: the batches are Kafka-shaped DataFrames made from CloudEvents, so parse, appends, fold and MERGEs are the
job's own. A batch's time is the job's ``enrichment.lake_batch_done`` record.

    .stack/venv/bin/python bench/batch_kinds.py                  # ~15 min on 2 busy cores
    .stack/venv/bin/python bench/batch_kinds.py --rounds 2       # smoke

Prints a markdown table: per writer and batch kind the median batch seconds and steps, the ratio all/assets per
writer (issue 25's goal: at most 1.5) and concurrent/sequential per kind. The stack need not run (Spark only).
"""

from __future__ import annotations

import argparse
import logging
import os
import platform
import secrets
import shutil
import statistics
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from bench.delta_commit_ab import KAFKA_SCHEMA, _BatchLog
from metalake.events import CloudEvent, new_event
from metalake.settings import load_settings
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from processors.enrichment.lake import LakeWriter
from processors.enrichment.session import build_spark
from processors.enrichment.tables import Layout

KINDS = ("assets", "all")
# Every kind of state and the health: a batch of kind "all" that misses one is no measure.
ALL_STEPS = (
    "events",
    "dlq",
    "dlq_unrouted",
    "merge_assets",
    "merge_classifications",
    "merge_lineage_edges",
    "merge_incidents",
    "merge_propagated_tags",
    "merge_asset_edits",
    "health",
)


def _urn(i: int) -> str:
    return asset_urn("bench", "local", "db", "public", f"t{i}")


# The assets of batches of kind "assets" are numbered from here: none of them has incidents, so those batches run no
# health MERGE (the batches of kind "all" put incidents on assets 0, 1, ...).
ASSETS_ONLY_FROM = 1_000_000


def _asset(tenant: str, i: int, version: int) -> CloudEvent:
    data = {"urn": _urn(i), "version": version, "kind": "table", "name": f"t{i}"}
    return new_event("io.metalake.asset.upserted.v1", tenant, data, source="/bench/kinds")


def _other(kind: int, tenant: str, i: int, version: int) -> CloudEvent:
    """An event of the ``kind``-th non-asset state on seeded asset ``i``."""
    urn, up = _urn(i), _urn(i + 1)
    events: list[tuple[str, dict[str, Any]]] = [
        ("io.metalake.classification.added.v1", {"urn": urn, "tag": "PII", "source": "auto"}),
        ("io.metalake.lineage.edge.added.v1", {"urn": urn, "upstream": up}),
        ("com.montecarlodata.incident.opened.v1", {"urn": urn, "incident_id": f"inc-{i}", "status": "opened"}),
        (
            "io.metalake.classification.propagated.v1",
            {"urn": urn, "tag": "PII", "origin": up, "path": [up, urn], "depth": 1},
        ),
        ("io.metalake.asset.edited.v1", {"urn": urn, "aspect": "description", "text": f"v{version}"}),
    ]
    event_type, data = events[kind % len(events)]
    return new_event(event_type, tenant, {**data, "version": version}, source="/bench/kinds")


def _records(events: list[CloudEvent], offset: int) -> Iterator[tuple[Any, ...]]:
    now = datetime.now(UTC)
    for i, event in enumerate(events):
        headers = [{"key": k, "value": v} for k, v in event.headers()]
        yield (event.key, event.value(), headers, "bench.kinds", i % 2, offset + i, now)


def batch(spark: SparkSession, kind: str, tenants: list[str], size: int, version: int, offset: int) -> DataFrame:
    """``size`` events of ``kind`` spread over the tenants (round robin) at ``version``."""
    events: list[CloudEvent] = []
    for i in range(size if kind == "assets" else size - 2):
        tenant, asset = tenants[i % len(tenants)], i // len(tenants)
        if kind == "assets":
            events.append(_asset(tenant, ASSETS_ONLY_FROM + asset, version))
        elif i % 2 == 0:
            events.append(_asset(tenant, asset, version))
        else:
            events.append(_other(i // 2, tenant, asset, version))
    rows = list(_records(events, offset))
    if kind == "all":
        key, _, headers, *rest = rows[0]
        rows.append((key, b'{"not": "an event"}', headers, *rest[:2], offset + len(rows), rest[3]))  # its tenant's
        rows.append((None, b"garbage", [], *rest[:2], offset + len(rows), rest[3]))  # no tenant: unrouted
    return spark.createDataFrame(rows, KAFKA_SCHEMA)


def writers(spark: SparkSession, settings: Settings, root: Path, parallelism: int) -> dict[str, LakeWriter]:
    out = {}
    for name, n in (("sequential", 1), ("concurrent", parallelism)):
        spark_settings = settings.spark.model_copy(update={"commit_parallelism": n})
        writer = LakeWriter(settings.model_copy(update={"spark": spark_settings}), f"kinds-{name}", Layout(root / name))
        writer.prepare(spark)
        out[name] = writer
    return out


def _check(kind: str, record: dict[str, Any]) -> None:
    missing = [s for s in (ALL_STEPS if kind == "all" else ("events", "merge_assets")) if s not in record["steps"]]
    if missing:
        raise SystemExit(f"a batch of kind {kind} did not write {missing}: {record}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tenants", type=int, default=16, help="pooled tenants (default 16)")
    parser.add_argument("--batch", type=int, default=120, help="events per measured batch (default 120)")
    parser.add_argument("--rounds", type=int, default=7, help="measured batches per writer and kind (default 7)")
    parser.add_argument("--parallelism", type=int, default=4, help="the concurrent writer's (default 4)")
    args = parser.parse_args(argv)

    settings = load_settings(Settings)
    parallelism = args.parallelism
    run = secrets.token_hex(3)
    root = settings.local_stack_dir / "bench" / f"kinds-{run}"
    spark = build_spark(settings, f"kinds-{run}")
    captured = _BatchLog()
    logging.getLogger("processors.enrichment.lake").addHandler(captured)
    logging.getLogger("processors.enrichment.lake").setLevel(logging.INFO)
    tenants = [f"k{run}-{i}" for i in range(args.tenants)]
    print(f"run {run}: {args.tenants} tenants, batches of {args.batch}, concurrent parallelism {parallelism}")
    combos = [(w, k) for w in ("sequential", "concurrent") for k in KINDS]
    results: dict[tuple[str, str], list[dict[str, Any]]] = {c: [] for c in combos}
    try:
        lake = writers(spark, settings, root, parallelism)
        counter = dict.fromkeys(lake, 0)  # each writer's batch ids, and the events' versions, only ever grow

        def write(w: str, k: str, size: int) -> None:
            counter[w] += 1
            frame = batch(spark, k, tenants, size, counter[w], counter[w] * 10 * size).cache()
            frame.count()  # made before the batch's clock starts
            lake[w](frame, counter[w])
            frame.unpersist()
            _check(k, captured.batches[-1])
            print(f"    {w}/{k} batch {counter[w]}: {captured.batches[-1]}", flush=True)  # kept if the run is cut

        for w in lake:  # the seed (assets), then a warm-up batch of every kind (a table's first write costs more)
            write(w, "assets", args.batch * 2)
            write(w, "all", args.batch)
        for r in range(1, args.rounds + 1):
            for w, k in combos[r % len(combos) :] + combos[: r % len(combos)]:
                write(w, k, args.batch)
                results[(w, k)].append(captured.batches[-1])
            line = ", ".join(f"{w}/{k} {results[(w, k)][-1]['seconds']:.2f}s" for w, k in combos)
            print(f"  round {r}/{args.rounds}: {line}", flush=True)
    finally:
        spark.stop()
        shutil.rmtree(root, ignore_errors=True)
    report(results, args.rounds, parallelism)
    return 0


def _median(records: list[dict[str, Any]], step: str | None = None) -> float:
    return statistics.median(float(r["seconds"] if step is None else r["steps"].get(step, 0.0)) for r in records)


def report(results: dict[tuple[str, str], list[dict[str, Any]]], rounds: int, parallelism: int) -> None:
    load = " ".join(f"{x:.1f}" for x in os.getloadavg())
    print(
        f"\n{datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, load average {load}, "
        f"python {sys.version.split()[0]}: median of {rounds} batches; concurrent = {parallelism} commits at once"
    )
    print("| writer | batch | s (median) | all/assets | vs sequential | steps (median s) |")
    print("|---|---|---|---|---|---|")
    for w, k in results:
        median = _median(results[(w, k)])
        ratio = median / _median(results[(w, "assets")])
        versus = median / _median(results[("sequential", k)])
        names = sorted({s for r in results[(w, k)] for s in r["steps"]})
        steps = ", ".join(f"{s} {_median(results[(w, k)], s):.2f}" for s in names)
        print(f"| {w} | {k} | {median:.2f} | {ratio:.2f} | {versus:.2f} | {steps} |")


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    sys.exit(main())
