"""Streaming benchmark: Kafka -> Delta + MongoDB, the enrichment job against a confluent-kafka + delta-rs baseline.

Three consumers run side by side in one run, each on its own fresh topic and its own fresh tenants (so they neither
read nor disturb anybody else's data):

- ``job``: the enrichment job's pooled query (bench/stream_job.py: the job's BatchWriter, Kafka source and
  supervisor, on the benchmark's topic). Per tenant and batch: events append, state MERGE, health, MongoDB upserts,
  change events, auto-classification, as in production.
- ``baseline``: bench/stream_baseline.py, confluent-kafka + ``deltalake`` as kafka-delta-ingest works: consume a batch,
  parse + validate, group by tenant, one append commit per tenant ``events`` table, then commit the offsets.
- ``baseline_mongo``: the same plus the job's guarded MongoDB upserts of the assets.

Phases: a warm-up (one event per tenant: creates every tenant's tables, registers the baseline tables in Trino);
throughput (a backlog of ``--events`` asset events over N tenants, for each N of ``--tenants``, timed from the first
publish until the consumer logged the batch holding the last one; ``--windows`` rounds, sides interleaved); freshness
(a steady ``--rate`` events/s over ``--fresh-tenants`` tenants for ``--fresh-seconds``; 4 probe events a second on the
first tenant, each timed from publish until visible in MongoDB and in Trino). Delta commit cost comes from the
consumers' own batch logs (the job's ``enrichment.batch_done`` step timings; the baseline times each
``write_deltalake``). Needs the stack (``metalake stack up``); the pooled job is not used.

    .stack/venv/bin/python bench/stream_bench.py                        # full run, ~15 min on 2 cores
    .stack/venv/bin/python bench/stream_bench.py --tenants 1,10 --windows 1 --windows-at-max 1 --fresh-windows 1
    # time-boxed (~18 min on 2 loaded cores; freshness first, 2 windows at the largest tenant count)
    .stack/venv/bin/python bench/stream_bench.py --windows 3 --windows-at-max 2 --fresh-windows 2 --freshness-first
    # the job with enrichment.tenant_parallelism 1, 2 and 4 side by side (A/B, windows alternate, no baselines)
    .stack/venv/bin/python bench/stream_bench.py --sides job --job-parallelism 1,2,4 --tenants 10 --windows 4 \
        --windows-at-max 4 --fresh-windows 0

Writes a JSON result file (``--out``) and prints a markdown table.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import signal
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trino
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from metalake.kafka.admin import ensure_topics
from metalake.settings import Settings, load_settings
from metalake.urn import asset_urn
from processors.enrichment.catalog import register_tenant_tables
from tenants.naming import names_for

BENCH_DIR = Path(__file__).resolve().parent
SIDES = ("job", "baseline", "baseline_mongo")
SHORT = {"job": "j", "baseline": "b", "baseline_mongo": "m"}
PARALLEL_JOB = "job-p"  # + N: the job with enrichment.tenant_parallelism = N (--job-parallelism)


def is_job(name: str) -> bool:
    return name == "job" or name.startswith(PARALLEL_JOB)


def short(name: str) -> str:
    return f"j{name.removeprefix(PARALLEL_JOB)}" if name.startswith(PARALLEL_JOB) else SHORT[name]


PROBES_PER_S = 4
FRESH_ASSETS = 100  # the steady load cycles over this many assets (per tenant at most)


def say(msg: str) -> None:
    print(f"[{datetime.now(UTC):%H:%M:%S}] {msg}", flush=True)


def pct(values: Sequence[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


class Stalled(RuntimeError):
    """A consumer processed nothing new for too long (seen: FerretDB holding a database's lock for minutes)."""


class BatchLog:
    """The batch lines a consumer process writes to its log (JSON lines among Spark's own output), as they come."""

    def __init__(self, path: Path, event: str) -> None:
        self.path = path
        self.event = event
        self.batches: list[dict[str, Any]] = []  # each with "seen": monotonic time we read it
        self._pos = 0
        self._partial = b""

    def poll(self) -> None:
        if not self.path.exists():
            return
        with self.path.open("rb") as f:
            f.seek(self._pos)
            chunk = f.read()
            self._pos = f.tell()
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        seen = time.monotonic()
        for line in lines:
            if not line.startswith(b"{"):
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("event") == self.event:
                record["seen"] = seen
                self.batches.append(record)

    def records(self) -> int:
        return sum(int(b["records"]) for b in self.batches)

    def contains(self, text: str) -> bool:
        return self.path.exists() and text in self.path.read_text(errors="replace")


@dataclass
class Side:
    name: str
    topic: str
    tenants: list[str]
    proc: subprocess.Popen[bytes]
    log: BatchLog
    ready: Callable[[], bool]
    results: dict[str, Any] = field(default_factory=dict)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def tail(self) -> str:
        return self.log.path.read_text(errors="replace")[-3000:] if self.log.path.exists() else ""

    def wait_records(self, total: int, timeout_s: float, stall_s: float | None = None) -> float:
        """Until the logged batches hold ``total`` records; the monotonic time the last needed batch was read.
        Raises ``Stalled`` when no batch at all was logged for ``stall_s``."""
        deadline = time.monotonic() + timeout_s
        progress = (len(self.log.batches), time.monotonic())
        while time.monotonic() < deadline:
            if len(self.log.batches) != progress[0]:
                progress = (len(self.log.batches), time.monotonic())
            elif stall_s is not None and time.monotonic() - progress[1] > stall_s:
                raise Stalled(f"{self.name}: no batch finished for {stall_s:.0f}s")
            if not self.alive():
                raise SystemExit(f"{self.name} died:\n{self.tail()}")
            self.log.poll()
            if self.log.records() >= total:
                running = 0
                for b in self.log.batches:
                    running += int(b["records"])
                    if running >= total:
                        return float(b["seen"])
            time.sleep(0.1)
        raise SystemExit(f"{self.name}: {total} records not processed after {timeout_s:.0f}s:\n{self.tail()}")


def asset_event(tenant: str, index: int, version: int, run: str) -> CloudEvent:
    """A new version of one of a tenant's bench tables. The benchmark updates a fixed set of assets per tenant, so
    the tables and collections keep their size from window to window (FerretDB's upsert slows down as a collection
    grows, which would otherwise make every window slower than the one before)."""
    name = f"t{run}x{index}"
    urn = asset_urn("bench", "local", "db", "public", name)
    return new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": urn, "version": version, "kind": "table", "name": name},
        source="/bench/stream",
    )


def side_topic(name: str, settings: Settings, run: str) -> str:
    return names_for(f"bench-{run}-{short(name)}", settings.lake_root, dedicated=True).priority_topic


def start_side(name: str, settings: Settings, run: str, max_tenants: int, workdir: Path) -> Side:
    topic = side_topic(name, settings, run)
    tenants = [f"b{short(name)}{run}-{i}" for i in range(max_tenants)]
    # One log per invocation: a --reuse run must not read the batches or the ready marker of an earlier one.
    stamp = datetime.now(UTC).strftime("%H%M%S")
    log_path = workdir / f"{name}-{stamp}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if name.startswith(PARALLEL_JOB):
        env["METALAKE_ENRICHMENT__TENANT_PARALLELISM"] = name.removeprefix(PARALLEL_JOB)
    if is_job(name):
        ready = workdir / f"{name}-{stamp}.ready"
        # The plain job keeps the names of earlier runs (--reuse); each parallelism variant has its own.
        suffix = "" if name == "job" else f"-{short(name)}"
        cmd = [
            sys.executable,
            str(BENCH_DIR / "stream_job.py"),
            "--topic",
            topic,
            "--query-name",
            f"bench-{run}{suffix}",
            "--checkpoint",
            str(workdir / f"checkpoint{suffix}"),
            "--ready-file",
            str(ready),
        ]
        event = "enrichment.batch_done"
    else:
        cmd = [
            sys.executable,
            str(BENCH_DIR / "stream_baseline.py"),
            "--topic",
            topic,
            "--group",
            f"bench-{run}-{name}",
        ]
        if name == "baseline_mongo":
            cmd.append("--mongo")
        event = "baseline.batch_done"
    with log_path.open("ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    log = BatchLog(log_path, event)
    if is_job(name):
        return Side(name, topic, tenants, proc, log, ready.exists)
    return Side(name, topic, tenants, proc, log, lambda: log.contains('"baseline.ready"'))


def publish(producer: EventProducer, events: Sequence[CloudEvent], topic: str) -> None:
    producer.publish(events, lambda e: topic)


def warm_up(side: Side, producer: EventProducer, settings: Settings, run: str, timeout_s: float) -> dict[str, Any]:
    """One event per tenant: the job creates each tenant's tables (and registers them in Trino), delta-rs creates
    the ``events`` table; then the baseline's tables are registered in Trino."""
    before = side.log.records()
    t0 = time.monotonic()
    publish(producer, [asset_event(t, 0, 1, run) for t in side.tenants], side.topic)
    done = side.wait_records(before + len(side.tenants), timeout_s)
    if not is_job(side.name):
        for tenant in side.tenants:
            register_tenant_tables(settings, names_for(tenant, settings.lake_root), ("events",))
    return {"tenants": len(side.tenants), "seconds": round(done - t0, 2)}


def throughput_window(
    side: Side, producer: EventProducer, n: int, events: int, seq: list[int], run: str
) -> dict[str, Any]:
    side.log.poll()
    before = side.log.records()
    first_batch = len(side.log.batches)
    seq[0] += 1  # one version per window: every event of a window updates an asset of an earlier one
    batch = [asset_event(side.tenants[i % n], i // n, seq[0], run) for i in range(events)]
    t0 = time.monotonic()
    publish(producer, batch, side.topic)
    published = time.monotonic() - t0
    # A 50-tenant batch of the job takes minutes on a loaded machine: only a much longer silence is a stall.
    done = side.wait_records(before + events, timeout_s=1200, stall_s=600)
    batches = [b for b in side.log.batches[first_batch:] if b["seen"] <= done]
    elapsed = done - t0
    return {
        "events": events,
        "seconds": round(elapsed, 3),
        "events_per_s": round(events / elapsed, 1),
        # Records over the time spent inside the batches: excludes waiting for a trigger or the batch latency.
        "busy_events_per_s": round(
            sum(int(b["records"]) for b in batches) / max(sum(float(b["seconds"]) for b in batches), 1e-6), 1
        ),
        "publish_s": round(published, 3),
        "load_avg": os.getloadavg()[0],
        "batches": [{k: b.get(k) for k in ("records", "tenants", "seconds", "steps", "commits")} for b in batches],
    }


@dataclass
class Probe:
    tenant: str
    urn: str
    event_id: str
    version: int
    t0: float
    mongo: float | None = None
    trino: float | None = None


def freshness_window(
    side: Side, settings: Settings, n: int, rate: float, seconds: float, seq: list[int], run: str
) -> dict[str, Any]:
    """A steady ``rate`` over ``n`` tenants; the first event of each 1/PROBES_PER_S tick goes to the first tenant
    and is timed until MongoDB (not for ``baseline``) and Trino see it."""
    probes: list[Probe] = []
    lock = threading.Lock()
    stop = threading.Event()
    tick = 1 / PROBES_PER_S

    def produce() -> None:
        with EventProducer(settings) as producer:
            next_at = time.monotonic()
            end = next_at + seconds
            owed = 0.0
            while next_at < end and not stop.is_set():
                owed += rate * tick
                per_tick = max(1, int(owed))
                owed -= per_tick
                batch = []
                for i in range(per_tick):
                    seq[0] += 1
                    tenant = side.tenants[0] if i == 0 else side.tenants[i % n]
                    batch.append(asset_event(tenant, seq[0] % FRESH_ASSETS, seq[0], run))
                t0 = time.monotonic()
                publish(producer, batch, side.topic)
                with lock:
                    probes.append(
                        Probe(side.tenants[0], batch[0].data["urn"], batch[0].id, batch[0].data["version"], t0)
                    )
                next_at += tick
                time.sleep(max(0.0, next_at - time.monotonic()))

    names = names_for(side.tenants[0], settings.lake_root)
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri)
    assets = mongo[names.mongo_database]["assets"]
    conn = trino.dbapi.connect(
        host=settings.trino.host, port=settings.trino.port, user="bench", catalog=settings.trino.catalog
    )
    cur = conn.cursor()
    check_mongo = side.name != "baseline"
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    deadline = time.monotonic() + seconds + 180
    last_trino = 0.0
    try:
        while time.monotonic() < deadline:
            with lock:
                pending_m = [p for p in probes if check_mongo and p.mongo is None]
                pending_t = [p for p in probes if p.trino is None]
            if not producer.is_alive() and not pending_m and not pending_t:
                break
            if not side.alive():
                raise SystemExit(f"{side.name} died:\n{side.tail()}")
            if pending_m:
                # The steady load cycles over a set of assets: a probe is seen once its version (or a newer) is.
                held = {
                    d["_id"]: d.get("version", 0)
                    for d in assets.find({"_id": {"$in": [p.urn for p in pending_m]}}, {"version": 1})
                }
                now = time.monotonic()
                for p in pending_m:
                    if held.get(p.urn, 0) >= p.version:
                        p.mongo = now - p.t0
            if pending_t and time.monotonic() - last_trino > 0.25:
                last_trino = time.monotonic()
                marks = ",".join("?" * len(pending_t))
                cur.execute(
                    f'SELECT event_id FROM "{names.trino_schema}".events WHERE event_id IN ({marks})',  # noqa: S608
                    [p.event_id for p in pending_t],
                )
                found = {r[0] for r in cur.fetchall()}
                now = time.monotonic()
                for p in pending_t:
                    if p.event_id in found:
                        p.trino = now - p.t0
            time.sleep(0.05)
    finally:
        stop.set()
        producer.join(timeout=30)
        conn.close()
        mongo.close()
    mongo_s = [p.mongo for p in probes if p.mongo is not None]
    trino_s = [p.trino for p in probes if p.trino is not None]
    return {
        "probes": len(probes),
        "mongo_s": [round(v, 3) for v in mongo_s],
        "trino_s": [round(v, 3) for v in trino_s],
        "unseen_mongo": (len(probes) - len(mongo_s)) if check_mongo else None,
        "unseen_trino": len(probes) - len(trino_s),
    }


def commit_costs(side: str, batches: list[dict[str, Any]]) -> dict[str, Any]:
    """Per Delta commit of a batch: the job's steps are summed over the batch's tenants (one events append and one
    assets MERGE per tenant); the baseline times every write_deltalake itself."""
    if is_job(side):
        per_append = [b["steps"].get("events", 0.0) / b["tenants"] for b in batches if b.get("tenants")]
        per_merge = [b["steps"].get("merge_assets", 0.0) / b["tenants"] for b in batches if b.get("tenants")]
        return {
            "append_s": median(per_append),
            "merge_assets_s": median(per_merge),
            "commits_per_batch": median([2 * b["tenants"] for b in batches]),
        }
    per_append = [c["seconds"] for b in batches for c in b.get("commits") or []]
    return {"append_s": median(per_append), "commits_per_batch": median([b["tenants"] for b in batches])}


def delta_commits(settings: Settings, tenants: Sequence[str], since_ms: int, until_ms: int) -> list[dict[str, Any]]:
    """The commitInfo of every commit made in [since_ms, until_ms] to the tenants' events and assets tables, read
    from the Delta logs themselves (both engines record a timestamp and operationMetrics)."""
    out = []
    for tenant in tenants:
        names = names_for(tenant, settings.lake_root)
        for table in ("events", "assets"):
            for commit in sorted(names.delta_path(table).glob("_delta_log/*.json")):
                for line in commit.read_text().splitlines():
                    info = json.loads(line).get("commitInfo")
                    if info and since_ms <= int(info["timestamp"]) <= until_ms:
                        out.append({"table": table, **info})
    return out


def delta_log_costs(commits: list[dict[str, Any]]) -> dict[str, Any]:
    """Delta's own timings: Spark's MERGE executionTimeMs (scan + rewrite + commit), delta-rs' execution_time_ms."""
    merges = [c for c in commits if c.get("operation") == "MERGE"]
    rs_writes = [c for c in commits if "execution_time_ms" in (c.get("operationMetrics") or {})]
    return {
        "commits": len(commits),
        "merge_execution_ms": median([float(c["operationMetrics"]["executionTimeMs"]) for c in merges]),
        "merge_scan_ms": median([float(c["operationMetrics"]["scanTimeMs"]) for c in merges]),
        "merge_rewrite_ms": median([float(c["operationMetrics"]["rewriteTimeMs"]) for c in merges]),
        "delta_rs_write_ms": median([float(c["operationMetrics"]["execution_time_ms"]) for c in rs_writes]),
    }


def summarize(args: argparse.Namespace, sides: list[Side], meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {**meta, "throughput": {}, "freshness": {}}
    for n in args.tenants:
        row: dict[str, Any] = {}
        for side in sides:
            windows = side.results.get("throughput", {}).get(str(n), [])
            batches = [b for w in windows for b in w["batches"]]
            row[side.name] = {
                "events_per_s": median([w["events_per_s"] for w in windows]),
                "windows_events_per_s": [w["events_per_s"] for w in windows],
                "busy_events_per_s": median([w["busy_events_per_s"] for w in windows]),
                "batch_s": median([b["seconds"] for b in batches]),
                "windows_batch_s": [[b["seconds"] for b in w["batches"]] for w in windows],
                "windows_load_avg": [w.get("load_avg") for w in windows],
                "batches_per_window": median([len(w["batches"]) for w in windows]),
                **commit_costs(side.name, batches),
                "delta_log": side.results.get("delta_log", {}).get(str(n)),
            }
        out["throughput"][str(n)] = row
    for side in sides:
        windows = side.results.get("freshness", [])
        mongo_all = [v for w in windows for v in w["mongo_s"]]
        trino_all = [v for w in windows for v in w["trino_s"]]
        out["freshness"][side.name] = {
            "probes": sum(w["probes"] for w in windows),
            "mongo_p50_s": pct(mongo_all, 0.5),
            "mongo_p99_s": pct(mongo_all, 0.99),
            "trino_p50_s": pct(trino_all, 0.5),
            "trino_p99_s": pct(trino_all, 0.99),
            "windows_mongo_p50_s": [pct(w["mongo_s"], 0.5) for w in windows],
            "windows_trino_p50_s": [pct(w["trino_s"], 0.5) for w in windows],
            "unseen": sum((w["unseen_mongo"] or 0) + w["unseen_trino"] for w in windows),
        }
    out["warm_up"] = {s.name: s.results.get("warm_up") for s in sides}
    out["stalled"] = {s.name: s.results["stalled"] for s in sides if "stalled" in s.results}
    return out


def fmt(v: float | None, unit: str = "", digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def delta_cell(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    if d["merge_execution_ms"] is not None:
        return (
            f"{d['commits']}, MERGE {fmt(d['merge_execution_ms'], '', 0)} (scan {fmt(d['merge_scan_ms'], '', 0)}, "
            f"rewrite {fmt(d['merge_rewrite_ms'], '', 0)})"
        )
    return f"{d['commits']}, write {fmt(d['delta_rs_write_ms'], '', 0)}"


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        "| tenants | consumer | events/s (median) | windows | busy events/s | batch s | Delta append / commit "
        "| MERGE assets / tenant | commits / batch | Delta log: commits, engine-reported ms |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, row in summary["throughput"].items():
        for side, r in row.items():
            append_ms = None if r["append_s"] is None else r["append_s"] * 1000
            merge_ms = None if r.get("merge_assets_s") is None else r["merge_assets_s"] * 1000
            lines.append(
                f"| {n} | {side} | **{fmt(r['events_per_s'], '', 1)}** | {r['windows_events_per_s']} "
                f"| {fmt(r['busy_events_per_s'], '', 1)} | {fmt(r['batch_s'])} | {fmt(append_ms, ' ms', 0)} "
                f"| {fmt(merge_ms, ' ms', 0)} "
                f"| {fmt(r['commits_per_batch'], '', 0)} | {delta_cell(r.get('delta_log'))} |"
            )
        ratios = [
            f"{side} {row['job']['events_per_s'] / row[side]['events_per_s']:.3f}"
            for side in row
            if side != "job" and "job" in row and row[side]["events_per_s"] and row["job"]["events_per_s"]
        ]
        if ratios:
            lines.append(f"| {n} | ratio job / | {', '.join(ratios)} | | | | | | | |")
        base = f"{PARALLEL_JOB}1"
        speedups = [
            f"{side} {row[side]['events_per_s'] / row[base]['events_per_s']:.2f}"
            for side in row
            if side.startswith(PARALLEL_JOB)
            and side != base
            and base in row
            and row[side]["events_per_s"]
            and row[base]["events_per_s"]
        ]
        if speedups:
            lines.append(f"| {n} | events/s vs {base} | {', '.join(speedups)} | | | | | | | |")
    lines += [
        "",
        "| consumer | probes | MongoDB p50 | MongoDB p99 | Trino p50 | Trino p99 | unseen |",
        "|---|---|---|---|---|---|---|",
    ]
    for side, f in summary["freshness"].items():
        lines.append(
            f"| {side} | {f['probes']} | {fmt(f['mongo_p50_s'], ' s')} | {fmt(f['mongo_p99_s'], ' s')} "
            f"| {fmt(f['trino_p50_s'], ' s')} | {fmt(f['trino_p99_s'], ' s')} | {f['unseen']} |"
        )
    return "\n".join(lines)


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenants", default="1,10,50", help="tenant counts for throughput (default 1,10,50)")
    parser.add_argument("--events", type=int, default=300, help="events per throughput window (default 300)")
    parser.add_argument("--windows", type=int, default=3, help="throughput windows per tenant count (default 3)")
    parser.add_argument(
        "--windows-at-max",
        type=int,
        default=2,
        help="throughput windows for the largest tenant count (default 2; one job window at 50 tenants "
        "is one batch of 100 Delta commits, several minutes on 2 cores)",
    )
    parser.add_argument("--fresh-windows", type=int, default=2, help="freshness windows per consumer (default 2)")
    parser.add_argument("--fresh-seconds", type=float, default=15, help="seconds of steady load per window")
    parser.add_argument("--rate", type=float, default=10, help="steady load, events/s (default 10)")
    parser.add_argument("--fresh-tenants", type=int, default=1, help="tenants the steady load spreads over")
    parser.add_argument(
        "--freshness-first",
        action="store_true",
        help="measure freshness right after the warm-up, before throughput (a time-boxed run keeps it even when "
        "the slow 50-tenant windows are cut short)",
    )
    parser.add_argument("--sides", default=",".join(SIDES), help=f"consumers to run (default {','.join(SIDES)})")
    parser.add_argument(
        "--job-parallelism",
        help="run the job once per value, e.g. 1,2,4: sides job-p1, job-p2, job-p4 with "
        "METALAKE_ENRICHMENT__TENANT_PARALLELISM set, in place of the side job (same run, windows alternate)",
    )
    parser.add_argument(
        "--reuse",
        metavar="RUN",
        help="reuse the topics, tenants, checkpoint and consumer groups of an earlier run (its id): the job then "
        "skips creating 8 Delta tables per tenant (~10-20 s each on 2 cores) in the warm-up",
    )
    parser.add_argument("--out", type=Path, help="JSON result file (default .stack/bench/stream-<run>/result.json)")
    args = parser.parse_args()
    args.tenants = [int(n) for n in args.tenants.split(",")]
    args.sides = [s for s in args.sides.split(",") if s]
    if unknown := set(args.sides) - set(SIDES):
        parser.error(f"--sides: unknown {sorted(unknown)}; known: {', '.join(SIDES)}")
    if args.job_parallelism:
        variants = [f"{PARALLEL_JOB}{int(p)}" for p in args.job_parallelism.split(",")]
        args.sides = [v for s in args.sides for v in (variants if s == "job" else [s])]
    if args.fresh_tenants > max(args.tenants):
        parser.error("--fresh-tenants must not exceed the largest --tenants")
    return args


def run_phases(
    args: argparse.Namespace, settings: Settings, sides: list[Side], run: str, save: Callable[[], object]
) -> None:
    """Warm-up, throughput, freshness; ``save`` after every window, so an interrupted run keeps what it measured."""
    seq = [1]  # the warm-up wrote version 1
    with EventProducer(settings) as producer:
        for side in sides:
            say(f"{side.name}: warm-up, one event for each of {len(side.tenants)} new tenants")
            side.results["warm_up"] = warm_up(side, producer, settings, run, timeout_s=1200)
            say(f"{side.name}: warm-up took {side.results['warm_up']['seconds']} s")
        if args.freshness_first:
            freshness_phase(args, settings, sides, run, seq, save)
        for n in args.tenants:
            windows = (
                args.windows_at_max if n == max(args.tenants) and args.windows_at_max is not None else args.windows
            )
            since_ms = int(time.time() * 1000)
            for w in range(windows):
                live = [s for s in sides if "stalled" not in s.results]
                # Rotate who goes first: a side never always runs right after the same other side.
                for side in live[w % len(live) :] + live[: w % len(live)] if live else []:
                    try:
                        r = throughput_window(side, producer, n, args.events, seq, run)
                    except Stalled as exc:
                        side.results["stalled"] = f"throughput n={n} window {w + 1}: {exc}"
                        say(f"{side.name} stalled, left out from here on: {exc}")
                        save()
                        continue
                    side.results.setdefault("throughput", {}).setdefault(str(n), []).append(r)
                    say(
                        f"throughput n={n} window {w + 1}/{windows} {side.name}: {r['events_per_s']} ev/s "
                        f"({r['seconds']} s, {len(r['batches'])} batches)"
                    )
                    save()
            until_ms = int(time.time() * 1000)
            for side in sides:
                commits = delta_commits(settings, side.tenants[:n], since_ms, until_ms)
                side.results.setdefault("delta_log", {})[str(n)] = delta_log_costs(commits)
    if not args.freshness_first:
        freshness_phase(args, settings, sides, run, seq, save)


def freshness_phase(
    args: argparse.Namespace,
    settings: Settings,
    sides: list[Side],
    run: str,
    seq: list[int],
    save: Callable[[], object],
) -> None:
    for w in range(args.fresh_windows):
        for side in [s for s in sides if "stalled" not in s.results]:
            r = freshness_window(side, settings, args.fresh_tenants, args.rate, args.fresh_seconds, seq, run)
            side.results.setdefault("freshness", []).append(r)
            say(
                f"freshness window {w + 1}/{args.fresh_windows} {side.name}: {r['probes']} probes, MongoDB p50 "
                f"{fmt(pct(r['mongo_s'], 0.5), ' s')}, Trino p50 {fmt(pct(r['trino_s'], 0.5), ' s')}"
            )
            save()


def main() -> None:
    args = parse_args()
    # Stopped with SIGTERM: unwind, so the finally below stops the consumer processes too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    settings = load_settings()
    run = args.reuse or secrets.token_hex(3)
    workdir = Path(".stack/bench") / f"stream-{run}"
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    say(f"run {run}: consumers {args.sides}, tenants {args.tenants}, logs in {workdir}")
    max_tenants = max(args.tenants)
    sides: list[Side] = []
    try:
        ensure_topics(settings, [side_topic(name, settings, run) for name in args.sides])
        for name in args.sides:
            sides.append(start_side(name, settings, run, max_tenants, workdir))
        for side in sides:
            deadline = time.monotonic() + 300
            while not side.ready():
                if not side.alive() or time.monotonic() > deadline:
                    raise SystemExit(f"{side.name} did not start:\n{side.tail()}")
                time.sleep(0.5)
        say("consumers ready")
        partial = workdir / "partial.json"
        run_phases(
            args,
            settings,
            sides,
            run,
            lambda: partial.write_text(json.dumps({s.name: s.results for s in sides}, indent=2, default=str)),
        )
    finally:
        for side in sides:
            if side.alive():
                side.proc.send_signal(signal.SIGTERM)
        for side in sides:
            try:
                side.proc.wait(timeout=90)
            except subprocess.TimeoutExpired:
                side.proc.kill()
    meta = {
        "run": run,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu",
        "load_avg_end": os.getloadavg(),
        "command": " ".join(sys.argv),
        "trigger": settings.spark.trigger_interval,
        "max_offsets_per_trigger": settings.spark.max_offsets_per_trigger,
        "events_per_window": args.events,
        "rate": args.rate,
        "fresh_tenants": args.fresh_tenants,
        "wall_s": round(time.monotonic() - started, 1),
    }
    raw = {s.name: s.results for s in sides}
    out = args.out or workdir / "result.json"
    out.write_text(json.dumps({"summary": None, "raw": raw, "meta": meta}, indent=2, default=str))
    summary = summarize(args, sides, meta)
    out.write_text(json.dumps({"summary": summary, "raw": raw}, indent=2, default=str))
    say(f"wrote {out} ({meta['wall_s']} s)")
    print(markdown(summary))


if __name__ == "__main__":
    main()
