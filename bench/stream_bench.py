"""Streaming benchmark: Kafka -> Delta + MongoDB, the real enrichment job against confluent-kafka + delta-rs baselines.

Three consumers run side by side in one run, each on fresh topics of its own and fresh tenants of its own (so they
neither read nor disturb anybody else's events):

- ``job``: the enrichment job itself, ``python -m processors.enrichment --query-name bench-<run>
  --topics <priority>,<bulk>``: its lake query (both topics -> the pooled tenants' shared Delta tables under
  ``<lake>/_pooled``, one commit per table and micro-batch) and its two projection queries (priority, bulk ->
  MongoDB, health, ``metalake.changes``), as in production. Checkpoints: ``<checkpoint root>/_pooled/bench-<run>-*``.
- ``baseline``: bench/stream_baseline.py, confluent-kafka + ``deltalake`` as kafka-delta-ingest works: consume a
  batch (1 s window, the job's lake trigger), parse + validate, group by tenant, one append commit per tenant's own
  ``events`` table (the batch's tenants in parallel), commit the offsets: the floor of the job's Delta side.
- ``baseline_mongo``: the same consumer writing only MongoDB, the job's guarded upserts of the assets, its tenants in
  parallel, with the job's projection trigger as its window (100 ms): the floor of the job's MongoDB side, which
  does not wait for Delta either.

Phases:
1. warm-up: one asset event per tenant (the largest ``--tenants``); the job registers each new tenant's Trino views
   over the shared tables (its registrar thread): the bench waits for them, so they do not load the windows.
2. throughput: for each N of ``--tenants``, ``--windows`` rounds (sides interleaved, who goes first rotates) of a
   backlog of ``--events`` asset events over N tenants, timed from the first publish until the consumer logged the
   batch that holds the window's last event: for Delta (the job's ``enrichment.lake_batch_done`` ``events`` sum) and
   for MongoDB (the ``enrichment.projection_batch_done`` ``records`` sum over both projection queries; the
   baselines' ``baseline.batch_done`` lines). Reported: events/s into Delta and into MongoDB, their ratio to the
   floor of each store (Delta: ``baseline``; MongoDB: ``baseline_mongo``), the
   median step timings of the lake batches (parse, events, fold, merge_assets, health ...) and of the projection
   batches (collect, mongo, health, changes ...), and the Delta commits per batch read from the ``_delta_log``
   commitInfo (the job: the shared ``events`` and ``assets`` tables, only the commits whose ``txn`` appId is the
   bench's lake query; the baselines: their tenants' own ``events`` tables).
3. freshness: a steady ``--rate`` events/s over ``--fresh-tenants`` tenants for ``--fresh-seconds``; 4 probe events
   a second go to the first tenant, each timed from Kafka's acknowledgement (the publish call returning) until
   visible in MongoDB (the asset document's version), in Trino ``assets`` (the asset's version through the tenant's
   view) and in Trino ``events`` (its event id). The job only has ``assets`` in Trino; ``baseline`` has no MongoDB,
   ``baseline_mongo`` no Delta.

Goals (issue 10), checked at the end: the job >= 1,000 events/s into Delta and into MongoDB at every tenant count,
flat within 25 % from the fewest to the most tenants, and >= the floor of each store (issue 25: the baselines as
real floors, so the job is reported against what the store itself allows); freshness MongoDB p50 <= 1 s
and p99 <= 2.5 s, Trino assets p50 <= 4 s and p99 <= 8 s, Trino events p99 <= 5 s.

The stack must be up (``metalake stack up``). The stack's own streaming job (``metalake stack up --with-job``) shares
the pooled Delta tables and the cores with the bench: stop it first (``metalake stack down stream``); the bench
refuses to run while it is running unless ``--allow-running-job`` (numbers then are not clean).

    .stack/venv/bin/python bench/stream_bench.py                        # full run (~45-60 min on 2 quiet cores)
    # smoke run (~10 min on a loaded machine)
    .stack/venv/bin/python bench/stream_bench.py --tenants 1,10 --events 300 --windows 1 --fresh-windows 1 \\
        --fresh-seconds 10 --rate 20 --fresh-tenants 5
    .stack/venv/bin/python bench/stream_bench.py --sides job --reuse 1a2b3c   # the job again, tenants and views kept

Writes a JSON result file (``--out``; ``partial.json`` beside it after every window) and prints markdown tables.
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
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pymongo import MongoClient
from trino.exceptions import TrinoQueryError

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from metalake.kafka.admin import ensure_topics
from metalake.settings import load_settings
from metalake.trino_connect import connect as trino_connect
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from tenants.lake_catalog import register_tables
from tenants.naming import names_for, pooled_table_path
from tenants.trino_schemas import trino_schema

BENCH_DIR = Path(__file__).resolve().parent
SIDES = ("job", "baseline", "baseline_mongo")
SHORT = {"job": "j", "baseline": "b", "baseline_mongo": "m"}
# The floor the job is reported against, per store.
FLOOR = {"delta": "baseline", "mongo": "baseline_mongo"}
# baseline_mongo's batch window: the job's projection trigger (processors.enrichment.settings, 100 ms).
MONGO_WINDOW_S = 0.1
LAKE_EVENT = "enrichment.lake_batch_done"
PROJECTION_EVENT = "enrichment.projection_batch_done"
BASELINE_EVENT = "baseline.batch_done"
# The shared tables a bench window writes (asset events: an events append, an assets MERGE, maybe a health MERGE).
JOB_TABLES = ("events", "assets")

PROBES_PER_S = 4
FRESH_ASSETS = 100  # the steady load cycles over this many assets (per tenant at most)
# Issue 10's goals.
GOAL_EVENTS_PER_S = 1000.0
GOAL_FLAT = 0.25  # the slowest tenant count at most 25 % below the fastest
GOAL_FRESHNESS = {  # (kind, percentile) -> seconds
    ("mongo", "p50"): 1.0,
    ("mongo", "p99"): 2.5,
    ("trino_assets", "p50"): 4.0,
    ("trino_assets", "p99"): 8.0,
    ("trino_events", "p99"): 5.0,
}
FRESH_KINDS = ("mongo", "trino_assets", "trino_events")


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
    """The batch lines of one kind (``event``) that a consumer process writes to its log (JSON lines among Spark's
    own output), as they come. ``count`` names the field that says how many of the bench's events a batch made
    durable: the lake's ``events`` (valid events), the projection's and the baseline's ``records``."""

    def __init__(self, path: Path, event: str, count: str) -> None:
        self.path = path
        self.event = event
        self.count = count
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
            # Spark's console progress bar shares lines with the log: "\r[Stage 3:>   (0 + 2) / 3]\r{...}".
            line = line[line.find(b'{"') :] if b'{"' in line else b""
            if not line:
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                continue
            if record.get("event") == self.event:
                record["seen"] = seen
                self.batches.append(record)

    def total(self) -> int:
        return sum(int(b.get(self.count) or 0) for b in self.batches)

    def contains(self, text: str) -> bool:
        return self.path.exists() and text in self.path.read_text(errors="replace")


def reached_at(batches: Iterable[dict[str, Any]], count: str, target: int) -> float | None:
    """The ``seen`` time of the batch with which the running sum of ``count`` reaches ``target``; None if never."""
    running = 0
    for b in batches:
        running += int(b.get(count) or 0)
        if running >= target:
            return float(b["seen"])
    return None


@dataclass
class Side:
    """One consumer process and its batch logs by target: the job's ``delta`` and ``mongo``, a baseline's one store."""

    name: str
    topics: tuple[str, str]  # priority, bulk (the baselines read the first only)
    tenants: list[str]
    proc: subprocess.Popen[bytes]
    logs: dict[str, BatchLog]
    ready: Callable[[], bool]
    results: dict[str, Any] = field(default_factory=dict)

    @property
    def topic(self) -> str:
        return self.topics[0]

    def alive(self) -> bool:
        return self.proc.poll() is None

    def poll(self) -> None:
        for log in {id(log): log for log in self.logs.values()}.values():
            log.poll()

    def tail(self) -> str:
        path = next(iter(self.logs.values())).path
        return path.read_text(errors="replace")[-3000:] if path.exists() else ""

    def totals(self) -> dict[str, int]:
        self.poll()
        return {target: log.total() for target, log in self.logs.items()}

    def marks(self) -> dict[str, int]:
        return {target: len(log.batches) for target, log in self.logs.items()}

    def wait(self, targets: dict[str, int], timeout_s: float, stall_s: float | None = None) -> dict[str, float]:
        """Until each target's log holds its count; the monotonic time each was reached (the batch was read).
        Raises ``Stalled`` when no batch at all was logged for ``stall_s``."""
        deadline = time.monotonic() + timeout_s
        progress = (0, time.monotonic())
        done: dict[str, float] = {}
        while time.monotonic() < deadline:
            self.poll()
            logged = sum(len(log.batches) for log in self.logs.values())
            if logged != progress[0]:
                progress = (logged, time.monotonic())
            elif stall_s is not None and time.monotonic() - progress[1] > stall_s:
                raise Stalled(f"{self.name}: no batch finished for {stall_s:.0f}s")
            for target, want in targets.items():
                log = self.logs[target]
                if target not in done and (at := reached_at(log.batches, log.count, want)) is not None:
                    done[target] = at
            if len(done) == len(targets):
                return done
            if not self.alive():
                raise SystemExit(f"{self.name} died:\n{self.tail()}")
            time.sleep(0.1)
        raise SystemExit(f"{self.name}: {targets} not reached after {timeout_s:.0f}s (got {done}):\n{self.tail()}")


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


def side_topics(name: str, settings: Settings, run: str) -> tuple[str, str]:
    names = names_for(f"bench-{run}-{SHORT[name]}", settings.lake_root, dedicated=True)
    return names.priority_topic, names.bulk_topic


def side_tenants(name: str, run: str, count: int) -> list[str]:
    return [f"b{SHORT[name]}{run}-{i}" for i in range(count)]


def job_query(run: str) -> str:
    return f"bench-{run}"


def start_side(name: str, settings: Settings, run: str, max_tenants: int, workdir: Path) -> Side:
    topics = side_topics(name, settings, run)
    tenants = side_tenants(name, run, max_tenants)
    # One log per invocation: a --reuse run must not read the batches or the ready marker of an earlier one.
    stamp = datetime.now(UTC).strftime("%H%M%S")
    log_path = workdir / f"{name}-{stamp}.log"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "METALAKE_TELEMETRY__LOG_FORMAT": "json"}
    if name == "job":
        ready = workdir / f"{name}-{stamp}.ready"
        cmd = [
            sys.executable,
            "-m",
            "processors.enrichment",
            "--query-name",
            job_query(run),
            "--topics",
            ",".join(topics),
            "--ready-file",
            str(ready),
        ]
    else:
        cmd = [
            sys.executable,
            str(BENCH_DIR / "stream_baseline.py"),
            "--topic",
            topics[0],
            "--group",
            f"bench-{run}-{name}",
        ]
        if name == "baseline_mongo":
            cmd += ["--store", "mongo", "--latency", str(MONGO_WINDOW_S)]
    with log_path.open("ab") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT)
    if name == "job":
        logs = {
            "delta": BatchLog(log_path, LAKE_EVENT, "events"),
            "mongo": BatchLog(log_path, PROJECTION_EVENT, "records"),
        }
        return Side(name, topics, tenants, proc, logs, ready.exists)
    log = BatchLog(log_path, BASELINE_EVENT, "records")
    logs = {"mongo": log} if name == "baseline_mongo" else {"delta": log}
    return Side(name, topics, tenants, proc, logs, lambda: log.contains('"baseline.ready"'))


def publish(producer: EventProducer, events: Sequence[CloudEvent], topic: str) -> None:
    producer.publish(events, lambda e: topic)


def trino_cursor(settings: Settings) -> Any:
    conn = trino_connect(settings, user="bench")
    return conn.cursor()


def wait_views(settings: Settings, tenants: Sequence[str], timeout_s: float) -> float | None:
    """Until every tenant's schema holds the views the registrar makes last (``_dlq``; ``events`` and ``assets``
    come before it); seconds waited, None on time-out (the bench goes on: only the first tenant is queried)."""
    schemas = sorted(trino_schema(settings, t) for t in tenants)
    cur = trino_cursor(settings)
    t0 = time.monotonic()
    marks = ",".join("?" * len(schemas))
    sql = (
        f"SELECT count(*) FROM {settings.trino.catalog}.information_schema.tables "  # noqa: S608 - fixed names
        f"WHERE table_name = '_dlq' AND table_schema IN ({marks})"
    )
    while time.monotonic() - t0 < timeout_s:
        try:
            cur.execute(sql, schemas)
            if int(cur.fetchall()[0][0]) >= len(schemas):
                return round(time.monotonic() - t0, 2)
        except TrinoQueryError as exc:
            say(f"waiting for the views: {exc.message}")
        time.sleep(2)
    return None


def warm_up(side: Side, producer: EventProducer, settings: Settings, run: str, timeout_s: float) -> dict[str, Any]:
    """One event per tenant: the job adds each tenant's rows to the shared tables and makes its Trino views (the
    bench waits for them); delta-rs creates each baseline tenant's ``events`` table, the bench registers the first
    tenant's in Trino (the only one freshness queries)."""
    before = side.totals()
    t0 = time.monotonic()
    publish(producer, [asset_event(t, 0, 1, run) for t in side.tenants], side.topic)
    done = side.wait({k: v + len(side.tenants) for k, v in before.items()}, timeout_s)
    out: dict[str, Any] = {"tenants": len(side.tenants), "seconds": round(max(done.values()) - t0, 2)}
    if side.name == "job":
        out["views_s"] = wait_views(settings, side.tenants, timeout_s)
        if out["views_s"] is None:
            say(f"job: not every tenant's Trino views after {timeout_s:.0f}s; going on")
    elif "delta" in side.logs:
        register_tables(settings, names_for(side.tenants[0], settings.lake_root), ("events",))
    return out


def window_batches(log: BatchLog, first: int, until: float) -> list[dict[str, Any]]:
    return [b for b in log.batches[first:] if b["seen"] <= until]


def throughput_window(
    side: Side, producer: EventProducer, n: int, events: int, seq: list[int], run: str
) -> dict[str, Any]:
    before = side.totals()
    first = side.marks()
    seq[0] += 1  # one version per window: every event of a window updates an asset of an earlier one
    batch = [asset_event(side.tenants[i % n], i // n, seq[0], run) for i in range(events)]
    t0 = time.monotonic()
    publish(producer, batch, side.topic)
    published = time.monotonic() - t0
    # A large batch of the job takes minutes on a loaded machine: only a much longer silence is a stall.
    done = side.wait({k: v + events for k, v in before.items()}, timeout_s=1800, stall_s=600)
    out: dict[str, Any] = {"events": events, "publish_s": round(published, 3), "load_avg": os.getloadavg()[0]}
    for target, at in done.items():
        log = side.logs[target]
        batches = window_batches(log, first[target], at)
        elapsed = at - t0
        out[target] = {
            "seconds": round(elapsed, 3),
            "events_per_s": round(events / elapsed, 1),
            # Events over the time spent inside the batches: excludes waiting for a trigger or between batches.
            "busy_events_per_s": round(
                sum(int(b.get(log.count) or 0) for b in batches) / max(sum(float(b["seconds"]) for b in batches), 1e-6),
                1,
            ),
            "batches": [{k: b.get(k) for k in ("query", log.count, "tenants", "seconds", "steps")} for b in batches],
        }
    return out


@dataclass
class Probe:
    tenant: str
    urn: str
    event_id: str
    version: int
    t0: float
    seen: dict[str, float] = field(default_factory=dict)  # kind -> seconds after the acknowledgement


def probe_kinds(side: str) -> tuple[str, ...]:
    """What a side makes visible: the job MongoDB and both Trino tables; ``baseline`` only ``events`` in Trino (its
    own tables), ``baseline_mongo`` only MongoDB."""
    return {"job": FRESH_KINDS, "baseline": ("trino_events",), "baseline_mongo": ("mongo",)}[side]


def mark_seen(probes: Iterable[Probe], kind: str, now: float) -> None:
    """Record when the probes (just found visible) were first seen as ``kind``."""
    for p in probes:
        p.seen.setdefault(kind, now - p.t0)


def freshness_window(
    side: Side, settings: Settings, n: int, rate: float, seconds: float, seq: list[int], run: str
) -> dict[str, Any]:
    """A steady ``rate`` over ``n`` tenants; the first event of each 1/PROBES_PER_S tick goes to the first tenant
    and is timed from its acknowledgement until MongoDB and Trino show it."""
    probes: list[Probe] = []
    lock = threading.Lock()
    stop = threading.Event()
    tick = 1 / PROBES_PER_S
    kinds = probe_kinds(side.name)

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
                # The probe is the batch's first record; the publish call returns once Kafka acknowledged them all.
                publish(producer, batch, side.topic)
                acked = time.monotonic()
                with lock:
                    probes.append(
                        Probe(side.tenants[0], batch[0].data["urn"], batch[0].id, batch[0].data["version"], acked)
                    )
                next_at += tick
                time.sleep(max(0.0, next_at - time.monotonic()))

    names = names_for(side.tenants[0], settings.lake_root)
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri)
    assets = mongo[names.mongo_database]["assets"]
    cur = trino_cursor(settings)
    schema = f'{settings.trino.catalog}."{trino_schema(settings, names.tenant_id)}"'
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    deadline = time.monotonic() + seconds + 180
    last_trino = 0.0
    trino_errors = 0
    try:
        while time.monotonic() < deadline:
            with lock:
                pending = {k: [p for p in probes if k not in p.seen] for k in kinds}
            if not producer.is_alive() and not any(pending.values()):
                break
            if not side.alive():
                raise SystemExit(f"{side.name} died:\n{side.tail()}")
            if pending.get("mongo"):
                # The steady load cycles over a set of assets: a probe is seen once its version (or a newer) is.
                held = {
                    d["_id"]: d.get("version", 0)
                    for d in assets.find({"_id": {"$in": [p.urn for p in pending["mongo"]]}}, {"version": 1})
                }
                seen = [p for p in pending["mongo"] if held.get(p.urn, 0) >= p.version]
                mark_seen(seen, "mongo", time.monotonic())
            if (pending.get("trino_events") or pending.get("trino_assets")) and time.monotonic() - last_trino > 0.25:
                last_trino = time.monotonic()
                try:
                    if pending.get("trino_events"):
                        ids = [p.event_id for p in pending["trino_events"]]
                        cur.execute(
                            f"SELECT event_id FROM {schema}.events WHERE event_id IN ({','.join('?' * len(ids))})",  # noqa: S608
                            ids,
                        )
                        found = {r[0] for r in cur.fetchall()}
                        seen = [p for p in pending["trino_events"] if p.event_id in found]
                        mark_seen(seen, "trino_events", time.monotonic())
                    if pending.get("trino_assets"):
                        urns = sorted({p.urn for p in pending["trino_assets"]})
                        cur.execute(
                            f"SELECT urn, version FROM {schema}.assets WHERE urn IN ({','.join('?' * len(urns))})",  # noqa: S608
                            urns,
                        )
                        versions = {r[0]: int(r[1] or 0) for r in cur.fetchall()}
                        seen = [p for p in pending["trino_assets"] if versions.get(p.urn, 0) >= p.version]
                        mark_seen(seen, "trino_assets", time.monotonic())
                except TrinoQueryError as exc:
                    trino_errors += 1
                    if trino_errors <= 3:
                        say(f"{side.name}: Trino: {exc.message}")
            time.sleep(0.05)
    finally:
        stop.set()
        producer.join(timeout=30)
        cur.connection.close()
        mongo.close()
    out: dict[str, Any] = {"probes": len(probes), "trino_errors": trino_errors}
    for kind in kinds:
        values = [p.seen[kind] for p in probes if kind in p.seen]
        out[f"{kind}_s"] = [round(v, 3) for v in values]
        out[f"unseen_{kind}"] = len(probes) - len(values)
    return out


# -- the Delta logs ----------------------------------------------------------------------------------------------


def read_commits(log_dir: Path, since_ms: int, until_ms: int) -> list[dict[str, Any]]:
    """The commitInfo of each commit in ``log_dir`` (a ``_delta_log``) made in [since_ms, until_ms], with the
    commit's ``txn`` appIds (``app_ids``); add/remove lines are not parsed. Files older than the window are skipped
    by their modification time (a minute's margin)."""
    out = []
    for path in sorted(log_dir.glob("*.json")):
        try:
            if path.stat().st_mtime * 1000 < since_ms - 60_000:
                continue
            text = path.read_text()
        except FileNotFoundError:
            continue
        info: dict[str, Any] | None = None
        apps: list[str] = []
        for line in text.splitlines():
            if line.startswith('{"commitInfo"'):
                info = json.loads(line)["commitInfo"]
            elif line.startswith('{"txn"'):
                apps.append(json.loads(line)["txn"]["appId"])
        if info is not None and since_ms <= int(info["timestamp"]) <= until_ms:
            out.append({**info, "version": int(path.stem), "app_ids": apps})
    return out


def job_commits(settings: Settings, run: str, since_ms: int, until_ms: int) -> list[dict[str, Any]]:
    """The bench job's commits to the shared tables: those carrying its lake query's txn (``<query>-lake``, and
    ``<query>-lake.health`` for the health MERGE); another writer of the shared tables (the stack's own job) has
    other appIds."""
    query = f"{job_query(run)}-lake"
    out = []
    for table in JOB_TABLES:
        log_dir = pooled_table_path(settings.lake_root, table) / "_delta_log"
        for c in read_commits(log_dir, since_ms, until_ms):
            if any(a == query or a.startswith(f"{query}.") for a in c["app_ids"]):
                out.append({"table": table, **c})
    return out


def baseline_commits(settings: Settings, tenants: Sequence[str], since_ms: int, until_ms: int) -> list[dict[str, Any]]:
    out = []
    for tenant in tenants:
        log_dir = names_for(tenant, settings.lake_root).delta_path("events") / "_delta_log"
        out += [{"table": "events", **c} for c in read_commits(log_dir, since_ms, until_ms)]
    return out


def delta_log_costs(commits: list[dict[str, Any]], batches: int) -> dict[str, Any]:
    """Commits per batch (all, and per table), and Delta's own timings: Spark's MERGE executionTimeMs (scan +
    rewrite + commit), delta-rs' execution_time_ms."""
    merges = [c for c in commits if c.get("operation") == "MERGE"]
    rs_writes = [c for c in commits if "execution_time_ms" in (c.get("operationMetrics") or {})]
    tables: dict[str, int] = {}
    for c in commits:
        tables[c["table"]] = tables.get(c["table"], 0) + 1
    return {
        "commits": len(commits),
        "batches": batches,
        "commits_per_batch": round(len(commits) / batches, 2) if batches else None,
        "per_table_per_batch": {t: round(k / batches, 2) for t, k in sorted(tables.items())} if batches else {},
        "merge_execution_ms": median([float(c["operationMetrics"]["executionTimeMs"]) for c in merges]),
        "merge_scan_ms": median([float(c["operationMetrics"]["scanTimeMs"]) for c in merges]),
        "merge_rewrite_ms": median([float(c["operationMetrics"]["rewriteTimeMs"]) for c in merges]),
        "delta_rs_write_ms": median([float(c["operationMetrics"]["execution_time_ms"]) for c in rs_writes]),
    }


# -- summary -----------------------------------------------------------------------------------------------------


def step_medians(batches: Iterable[dict[str, Any]]) -> dict[str, float]:
    """The median of each step over the batches that ran it (a step a batch skipped, e.g. ``health`` without
    incidents, is not a zero)."""
    by_step: dict[str, list[float]] = {}
    for b in batches:
        for step, seconds in (b.get("steps") or {}).items():
            by_step.setdefault(step, []).append(float(seconds))
    return {step: round(statistics.median(v), 3) for step, v in sorted(by_step.items())}


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 3) if a and b else None


def summarize_throughput(windows: list[dict[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {"windows": len(windows), "publish_s": median([w["publish_s"] for w in windows])}
    for target in ("delta", "mongo"):
        got = [w[target] for w in windows if target in w]
        if not got:
            out[target] = None
            continue
        batches = [b for g in got for b in g["batches"]]
        out[target] = {
            "events_per_s": median([g["events_per_s"] for g in got]),
            "windows_events_per_s": [g["events_per_s"] for g in got],
            "busy_events_per_s": median([g["busy_events_per_s"] for g in got]),
            "batch_s": median([float(b["seconds"]) for b in batches]),
            "batches_per_window": median([len(g["batches"]) for g in got]),
            "steps": step_medians(batches),
        }
    return out


def summarize(args: argparse.Namespace, sides: list[Side], meta: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {**meta, "throughput": {}, "freshness": {}}
    for n in args.tenants:
        row: dict[str, Any] = {}
        for side in sides:
            windows = side.results.get("throughput", {}).get(str(n), [])
            if not windows:
                continue
            row[side.name] = {
                **summarize_throughput(windows),
                "windows_load_avg": [w.get("load_avg") for w in windows],
                "delta_log": side.results.get("delta_log", {}).get(str(n)),
            }
        out["throughput"][str(n)] = row
    for side in sides:
        windows = side.results.get("freshness", [])
        if not windows:
            continue
        f: dict[str, Any] = {"probes": sum(w["probes"] for w in windows)}
        for kind in probe_kinds(side.name):
            values = [v for w in windows for v in w.get(f"{kind}_s", [])]
            f[kind] = {
                "p50_s": pct(values, 0.5),
                "p99_s": pct(values, 0.99),
                "max_s": max(values) if values else None,
                "windows_p50_s": [pct(w.get(f"{kind}_s", []), 0.5) for w in windows],
                "unseen": sum(w.get(f"unseen_{kind}", 0) for w in windows),
            }
        out["freshness"][side.name] = f
    out["goals"] = goals(out)
    out["warm_up"] = {s.name: s.results.get("warm_up") for s in sides}
    out["stalled"] = {s.name: s.results["stalled"] for s in sides if "stalled" in s.results}
    return out


def rate(summary: dict[str, Any], n: str, side: str, target: str) -> float | None:
    r = summary["throughput"].get(n, {}).get(side)
    return r[target]["events_per_s"] if r and r.get(target) else None


def goals(summary: dict[str, Any]) -> list[dict[str, Any]]:
    """Issue 10's goals for the job, each with what was measured and whether it holds (None: not measured)."""
    out: list[dict[str, Any]] = []
    counts = list(summary["throughput"])
    for target in ("delta", "mongo"):
        rates = {n: rate(summary, n, "job", target) for n in counts}
        measured = [v for v in rates.values() if v is not None]
        worst = min(measured) if measured else None
        out.append(
            {
                "goal": f"job events/s into {target} >= {GOAL_EVENTS_PER_S:.0f} at every tenant count",
                "measured": rates,
                "ok": None if worst is None else worst >= GOAL_EVENTS_PER_S,
            }
        )
        flat = round(1 - min(measured) / max(measured), 3) if len(measured) > 1 and max(measured) else None
        out.append(
            {
                "goal": f"job events/s into {target} flat within {GOAL_FLAT:.0%} over the tenant counts",
                "measured": flat,
                "ok": None if flat is None else flat <= GOAL_FLAT,
            }
        )
        floor = FLOOR[target]
        vs = {n: ratio(rates[n], rate(summary, n, floor, target)) for n in counts}
        known = [v for v in vs.values() if v is not None]
        out.append(
            {
                "goal": f"job events/s into {target} >= {floor}'s",
                "measured": vs,
                "ok": min(known) >= 1.0 if known else None,
            }
        )
    fresh = summary["freshness"].get("job", {})
    for (kind, p), limit in GOAL_FRESHNESS.items():
        value = (fresh.get(kind) or {}).get(f"{p}_s")
        out.append(
            {
                "goal": f"job freshness {kind} {p} <= {limit:g} s",
                "measured": value,
                "ok": None if value is None else value <= limit,
            }
        )
    return out


def fmt(v: float | None, unit: str = "", digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}{unit}"


def steps_cell(steps: dict[str, float] | None) -> str:
    return ", ".join(f"{k} {v:.2f}" for k, v in steps.items()) if steps else "-"


def delta_cell(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    tables = " + ".join(f"{t} {k:g}" for t, k in d["per_table_per_batch"].items())
    out = f"{fmt(d['commits_per_batch'], '', 2)} ({tables})" if tables else fmt(d["commits_per_batch"])
    if d["merge_execution_ms"] is not None:
        out += (
            f"; MERGE {fmt(d['merge_execution_ms'], ' ms', 0)} (scan {fmt(d['merge_scan_ms'], '', 0)}, "
            f"rewrite {fmt(d['merge_rewrite_ms'], '', 0)})"
        )
    if d["delta_rs_write_ms"] is not None:
        out += f"; write {fmt(d['delta_rs_write_ms'], ' ms', 0)}"
    return out


def markdown(summary: dict[str, Any]) -> str:
    lines = [
        "| tenants | consumer | Delta events/s | windows | MongoDB events/s | windows | busy Delta ev/s "
        "| Delta batch s | batches / window | Delta steps (median s) | MongoDB steps (median s) "
        "| Delta commits / batch |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for n, row in summary["throughput"].items():
        for side, r in row.items():
            d, m = r.get("delta") or {}, r.get("mongo") or {}
            mongo_steps = m.get("steps") if side == "job" else None
            lines.append(
                f"| {n} | {side} | **{fmt(d.get('events_per_s'), '', 1)}** | {d.get('windows_events_per_s', '-')} "
                f"| **{fmt(m.get('events_per_s'), '', 1)}** | {m.get('windows_events_per_s', '-')} "
                f"| {fmt(d.get('busy_events_per_s'), '', 1)} | {fmt(d.get('batch_s'))} "
                f"| {fmt(d.get('batches_per_window'), '', 1)} | {steps_cell(d.get('steps'))} "
                f"| {steps_cell(mongo_steps)} | {delta_cell(r.get('delta_log'))} |"
            )
        if "job" in row:
            ratios = [
                f"{target} / {side} {v:.2f}"
                for target, side in FLOOR.items()
                if (v := ratio(rate(summary, n, "job", target), rate(summary, n, side, target))) is not None
            ]
            if ratios:
                lines.append(f"| {n} | ratio job | {', '.join(ratios)} | | | | | | | | | |")
    lines += [
        "",
        "| consumer | probes | MongoDB p50 | MongoDB p99 | Trino assets p50 | Trino assets p99 | Trino events p50 "
        "| Trino events p99 | unseen (MongoDB, assets, events) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for side, f in summary["freshness"].items():
        cells = []
        unseen = []
        for kind in FRESH_KINDS:
            k = f.get(kind)
            cells += [fmt(k["p50_s"], " s"), fmt(k["p99_s"], " s")] if k else ["-", "-"]
            unseen.append(str(k["unseen"]) if k else "-")
        lines.append(f"| {side} | {f['probes']} | {' | '.join(cells)} | {', '.join(unseen)} |")
    lines += ["", "| goal (issue 10) | measured | holds |", "|---|---|---|"]
    for g in summary.get("goals", []):
        holds = {True: "yes", False: "**no**", None: "-"}[g["ok"]]
        lines.append(f"| {g['goal']} | {g['measured']} | {holds} |")
    return "\n".join(lines)


# -- the run -----------------------------------------------------------------------------------------------------


def stream_job_running(status: str) -> str | None:
    """The pid (or "?") of the stack's streaming job if ``metalake stack status`` shows its process (state
    ``running`` or ``unhealthy``, e.g. still starting), else None."""
    for line in status.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[0] == "stream" and parts[1] != "stopped":
            return parts[2] if len(parts) > 2 and parts[2] != "-" else "?"
    return None


def check_stack_job(allow: bool) -> None:
    try:
        status = subprocess.run(
            [sys.executable, "-m", "ops", "stack", "status"], capture_output=True, text=True, timeout=120
        ).stdout
    except subprocess.TimeoutExpired:
        say("warning: `metalake stack status` did not answer in 120 s; cannot tell whether the stack's job runs")
        return
    pid = stream_job_running(status)
    if pid is None:
        return
    message = (
        f"the stack's own streaming job is running (pid {pid}): it writes the same shared Delta tables and takes "
        "the same cores as the bench's job. Stop it for clean numbers: `metalake stack down stream` "
        "(and `metalake stack up --with-job` after)"
    )
    if not allow:
        raise SystemExit(f"error: {message}; or pass --allow-running-job to measure anyway.")
    say(f"warning: {message}. Going on (--allow-running-job): the numbers are not clean.")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument(
        "--tenants", default="1,10,50,200", help="pooled tenant counts for throughput (default 1,10,50,200)"
    )
    parser.add_argument(
        "--events",
        type=int,
        default=10_000,
        help="asset events per throughput window (default 10000: tens of seconds at the 1,000 events/s goal "
        "with the trigger and batch latency, so the rate is a sustained one)",
    )
    parser.add_argument("--windows", type=int, default=3, help="throughput windows per tenant count (default 3)")
    parser.add_argument(
        "--windows-at-max", type=int, help="throughput windows for the largest tenant count (default: --windows)"
    )
    parser.add_argument("--fresh-windows", type=int, default=2, help="freshness windows per consumer (default 2)")
    parser.add_argument(
        "--fresh-seconds", type=float, default=30, help="seconds of steady load per freshness window (default 30)"
    )
    parser.add_argument("--rate", type=float, default=200, help="steady load of the freshness phase, events/s (200)")
    parser.add_argument(
        "--fresh-tenants", type=int, default=50, help="tenants the steady load spreads over (default 50)"
    )
    parser.add_argument(
        "--freshness-first",
        action="store_true",
        help="measure freshness right after the warm-up, before throughput (a time-boxed run keeps it even when "
        "the throughput windows are cut short)",
    )
    parser.add_argument("--sides", default=",".join(SIDES), help=f"consumers to run (default {','.join(SIDES)})")
    parser.add_argument(
        "--reuse",
        metavar="RUN",
        help="reuse the topics, tenants, job query name (so its checkpoints) and consumer groups of an earlier run "
        "(its id): the tenants' Trino views and the baselines' tables exist, so the warm-up is short",
    )
    parser.add_argument(
        "--allow-running-job",
        action="store_true",
        help="run even though `metalake stack status` shows the stack's own streaming job running (by default the "
        "bench refuses: that job shares the pooled Delta tables and the cores, so the numbers would not be clean)",
    )
    parser.add_argument("--out", type=Path, help="JSON result file (default .stack/bench/stream-<run>/result.json)")
    args = parser.parse_args(argv)
    args.tenants = [int(n) for n in args.tenants.split(",")]
    args.sides = [s for s in args.sides.split(",") if s]
    if unknown := set(args.sides) - set(SIDES):
        parser.error(f"--sides: unknown {sorted(unknown)}; known: {', '.join(SIDES)}")
    if args.fresh_windows and args.fresh_tenants > max(args.tenants):
        parser.error("--fresh-tenants must not exceed the largest --tenants")
    return args


def run_phases(
    args: argparse.Namespace, settings: Settings, sides: list[Side], run: str, save: Callable[[], object]
) -> None:
    """Warm-up, throughput, freshness; ``save`` after every window, so an interrupted run keeps what it measured."""
    # Versions start at the clock (ms): above those of any earlier run on the same assets (--reuse), or a probe
    # would be "seen" at once by an older, higher version. The warm-up's version 1 only has to be counted.
    seq = [int(time.time() * 1000)]
    with EventProducer(settings) as producer:
        for side in sides:
            say(f"{side.name}: warm-up, one event for each of {len(side.tenants)} tenants")
            side.results["warm_up"] = warm_up(side, producer, settings, run, timeout_s=1200)
            say(f"{side.name}: warm-up {side.results['warm_up']}")
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
                    rates = ", ".join(
                        f"{t} {r[t]['events_per_s']} ev/s ({r[t]['seconds']} s, {len(r[t]['batches'])} batches)"
                        for t in ("delta", "mongo")
                        if t in r
                    )
                    say(f"throughput n={n} window {w + 1}/{windows} {side.name}: {rates}")
                    save()
            until_ms = int(time.time() * 1000)
            for side in sides:
                windows_n = side.results.get("throughput", {}).get(str(n), [])
                if "delta" not in side.logs:
                    continue
                batches = sum(len(r["delta"]["batches"]) for r in windows_n)
                if side.name == "job":
                    commits = job_commits(settings, run, since_ms, until_ms)
                else:
                    commits = baseline_commits(settings, side.tenants[:n], since_ms, until_ms)
                side.results.setdefault("delta_log", {})[str(n)] = delta_log_costs(commits, batches)
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
            seen = ", ".join(
                f"{k} p50 {fmt(pct(r[f'{k}_s'], 0.5), ' s')} p99 {fmt(pct(r[f'{k}_s'], 0.99), ' s')}"
                for k in probe_kinds(side.name)
            )
            say(f"freshness window {w + 1}/{args.fresh_windows} {side.name}: {r['probes']} probes, {seen}")
            save()


def main() -> None:
    args = parse_args()
    # Stopped with SIGTERM: unwind, so the finally below stops the consumer processes too.
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(143))
    check_stack_job(args.allow_running_job)
    settings = load_settings(Settings)
    run = args.reuse or secrets.token_hex(3)
    workdir = Path(".stack/bench") / f"stream-{run}"
    workdir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    say(f"run {run}: consumers {args.sides}, tenants {args.tenants}, logs in {workdir}")
    max_tenants = max(args.tenants)
    sides: list[Side] = []
    try:
        ensure_topics(settings, [t for name in args.sides for t in side_topics(name, settings, run)])
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
        "projection_trigger": settings.spark.projection_trigger_interval,
        "max_offsets_per_trigger": settings.spark.max_offsets_per_trigger,
        "projection_max_offsets_per_trigger": settings.spark.projection_max_offsets_per_trigger,
        "events_per_window": args.events,
        "rate": args.rate,
        "fresh_tenants": args.fresh_tenants,
        "stack_job_allowed": args.allow_running_job,
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
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
