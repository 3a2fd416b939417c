"""Propagation on a synthetic lineage graph: time from the tag event to every propagated tag committed, against a
plain in-memory graph walk over the same graph (the floor), in the same run.

The graph: ``--tables`` tables in ``--layers`` layers, ``--columns`` columns each; every table past the first layer
reads ``--upstreams`` random tables of the layer before (a table edge), and its column j reads column j of each of
them (column edges). Round r puts a PII tag on column 0 of the r-th first-layer table that feeds anything; it
propagates along the column edges.

Measured, each a median of ``--repeat`` runs:
- floor: breadth-first search over ``dict[str, list[str]]`` adjacency (no directions, blocks or paths kept);
- closure: ``catalog.propagation.graph.closure`` (directions, blocked tags, paths, guardrails);
- plan: the processor's recompute of one origin (closure + diff against what is held + rows with versions and ids);
- pipeline (unless ``--no-pipeline``): the real pipeline for a fresh dedicated tenant (its own streaming job of this
  checkout and its own ``metalake propagation run``): classification event published to the tenant's priority topic
  -> Spark job commits it (Delta, MongoDB, metalake.changes) -> processor recomputes and publishes the propagated
  tags -> Spark job commits them (Delta MERGE into ``propagated_tags``, MongoDB upserts). Timed: until the
  classification is in MongoDB, until the processor's completed event is on metalake.changes, until every
  propagated tag is live in MongoDB, until Trino counts them all in the Delta table, and until all notifications
  were sent (unless ``--no-outbound``): the outbound runtime (``bench/outbound_child.py``: the build of
  ``processors.outbound.main``, what ``metalake outbound run`` starts, scoped to the bench tenant's subscriptions so
  it never delivers other tenants' changes, and the subscription kept in the tenant's own database so no other
  runtime on the machine delivers it; consumer groups of its own; loopback let through its SSRF guard for that
  process only) delivers the tenant's signed-webhook subscription to a loopback receiver in the bench, which
  verifies the signatures and notes arrival times. Counted notifications (``bench/outbound_probe.py: COUNTED``): the
  origin's ``classification.added`` and its ``propagation.completed``; the subscription filters out the per-column
  ``tag.propagated`` changes (one delivery per reached column would time outbound throughput, not the tag's
  notification). Each round tags another origin, so every propagated row is new (the key holds the origin).
  Removals are not timed here. The lineage itself is written straight into MongoDB's ``lineage`` collection (setup,
  not timed: the processor loads it from there at start), not through Kafka and Delta. The MongoDB projection is the
  longest step of a round on the local FerretDB (about 27 s for 3 927 new rows at load 3-4, see docs/benchmarks.md);
  a round that times out reports the stages it reached.

    .stack/venv/bin/metalake stack up
    .stack/venv/bin/python bench/propagation_bench.py --repeat 3
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import secrets
import statistics
import subprocess
import sys
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any

import trino
from confluent_kafka import Consumer, TopicPartition

# bench/ is on sys.path when this runs as a script.
from outbound_probe import COUNTED, Receiver, new_secret, outbound_runtime, subscribe, terminate, unsubscribe
from pymongo import MongoClient

from catalog.propagation.graph import Edge, Limits, LineageGraph, closure
from catalog.propagation.model import Assignment
from catalog.propagation.tenant import TenantPropagation
from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.kafka.config import consumer_config
from metalake.settings import load_settings
from metalake.trino_connect import connect as trino_connect
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from tenants.model import Tier
from tenants.naming import CHANGES_TOPIC, TenantNames
from tenants.registry import TenantDirectory, TenantRegistry, TenantState
from tenants.trino_schemas import trino_schema

Pair = tuple[str, str]


def table_urn(layer: int, index: int) -> str:
    return f"urn:metalake:bench:local/db/l{layer}/t{index}"


def build_graph(tables: int, columns: int, layers: int, upstreams: int, seed: int) -> tuple[list[Pair], list[Pair]]:
    rng = random.Random(seed)
    per_layer = tables // layers
    table_edges: list[Pair] = []
    column_edges: list[Pair] = []
    for layer in range(1, layers):
        for index in range(per_layer):
            down = table_urn(layer, index)
            for up_index in rng.sample(range(per_layer), upstreams):
                up = table_urn(layer - 1, up_index)
                table_edges.append((up, down))
                column_edges.extend((f"{up}/c{j}", f"{down}/c{j}") for j in range(columns))
    return table_edges, column_edges


def floor_bfs(adjacency: dict[str, list[str]], origin: str) -> int:
    seen = {origin}
    queue = deque([origin])
    while queue:
        for nxt in adjacency.get(queue.popleft(), ()):
            if nxt not in seen:
                seen.add(nxt)
                queue.append(nxt)
    return len(seen) - 1


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    samples = []
    result = None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples), result


def in_memory(pairs: list[Pair], origins: list[str], repeat: int, limits: Limits) -> dict[str, Any]:
    """Per origin, the median of ``repeat`` runs of each walk; reported as the median over the origins."""
    adjacency: dict[str, list[str]] = {}
    for up, down in pairs:
        adjacency.setdefault(up, []).append(down)
    graph = LineageGraph(Edge(up, down) for up, down in pairs)
    floors, closures, plans, reached = [], [], [], []
    for origin in origins:
        floor_s, floor_n = timed(partial(floor_bfs, adjacency, origin), repeat)
        closure_s, found = timed(partial(closure, graph, origin, "PII", limits), repeat)
        if len(found.reached) != floor_n or found.truncated:
            raise RuntimeError(
                f"closure reached {len(found.reached)} (truncated {found.truncated}), the floor {floor_n}"
            )

        def plan(o: str = origin) -> int:
            state = TenantPropagation("bench", limits, graph=graph)
            state.assignments[(o, "PII")] = Assignment(o, "PII", (1, "bench"))
            return len(state.plan((o, "PII")).added)

        plan_s, planned = timed(plan, repeat)
        if planned != floor_n:
            raise RuntimeError(f"the plan has {planned} rows, the floor reaches {floor_n}")
        floors.append(floor_s)
        closures.append(closure_s)
        plans.append(plan_s)
        reached.append(floor_n)
    return {
        "reached_per_origin": reached,
        "floor_bfs_s": round(statistics.median(floors), 6),
        "closure_s": round(statistics.median(closures), 6),
        "plan_s": round(statistics.median(plans), 6),
    }


# --- the real pipeline -----------------------------------------------------------------------------------------------


@contextmanager
def child(cmd: list[str], log: Path, ready: Path, timeout_s: float) -> Iterator[subprocess.Popen[bytes]]:
    ready.unlink(missing_ok=True)
    with log.open("ab") as out:
        proc = subprocess.Popen(
            [sys.executable, *cmd, "--ready-file", str(ready)], stdout=out, stderr=subprocess.STDOUT, env=os.environ
        )
    try:
        deadline = time.monotonic() + timeout_s
        while not ready.exists():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"{cmd[1]} did not get ready; see {log}")
            time.sleep(0.5)
        yield proc
    finally:
        terminate(proc)


def seed_lineage(mongo: MongoClient[dict[str, Any]], names: TenantNames, pairs: list[Pair]) -> float:
    now = datetime.now(UTC)
    lineage = mongo[names.mongo_database]["lineage"]
    started = time.monotonic()
    for start in range(0, len(pairs), 5000):
        docs = [
            {
                "_id": f"{up}|{down}",
                "upstream": up,
                "urn": down,
                "blocked_tags": None,
                "transformation": None,
                "propagation": "downstream",
                "deleted": False,
                "version": 1,
                "event_id": "bench-seed",
                "event_time": now,
                "updated_at": now,
            }
            for up, down in pairs[start : start + 5000]
        ]
        lineage.insert_many(docs, ordered=False)
    return time.monotonic() - started


def tag_event(tenant: str, origin: str, version: int) -> CloudEvent:
    data = {"urn": origin, "version": version, "tag": "PII", "source": "human", "propagate": True}
    return new_event("io.metalake.classification.added.v1", tenant, data, source="/bench/propagation")


class Probe:
    """Polls MongoDB, Trino and metalake.changes for one round; records when each first met its target."""

    def __init__(
        self,
        settings: Settings,
        names: TenantNames,
        mongo: MongoClient[dict[str, Any]],
        cursor: Any,
        receiver: Receiver | None = None,
        count_every_s: float = 2.0,
    ) -> None:
        self.names = names
        self.schema = trino_schema(settings, names.tenant_id)
        self.count_every_s = count_every_s
        self.receiver = receiver
        self.db = mongo[names.mongo_database]
        self.cursor = cursor
        self.changes = Consumer(consumer_config(settings, f"bench-{secrets.token_hex(4)}"))
        parts = self.changes.list_topics(CHANGES_TOPIC, timeout=10).topics[CHANGES_TOPIC].partitions
        self.changes.assign([TopicPartition(CHANGES_TOPIC, p, self._end(p)) for p in parts])

    def _end(self, partition: int) -> int:
        return self.changes.get_watermark_offsets(TopicPartition(CHANGES_TOPIC, partition), timeout=10)[1]

    def _completed(self) -> int:
        found = 0
        for msg in self.changes.consume(num_messages=1000, timeout=0.2):
            headers = dict(msg.headers() or [])
            if (
                msg.error() is None
                and headers.get("ce_type") == b"io.metalake.propagation.completed.v1"
                and headers.get("ce_tenantid") == self.names.tenant_id.encode()
            ):
                found += 1
        return found

    def round(self, started: float, origin: str, tags: int, live: int, timeout_s: float) -> dict[str, float]:
        """Until ``tags`` classifications are in MongoDB, one completed event was published, ``live`` propagated
        tags are live in MongoDB and in the Delta table (through Trino), and the receiver got the counted
        notifications about ``origin`` (timed on arrival, not polled). Polls every half second, the two counts of
        propagated tags every ``count_every_s``."""
        marks: dict[str, float] = {}
        schema = self.schema
        wanted = 4 + (len(COUNTED) + 1 if self.receiver else 0)
        next_count = 0.0
        while len(marks) < wanted:
            if time.monotonic() - started > timeout_s:
                # Kept, not raised: what a stalled round did reach is the finding.
                return {**{k: round(v, 3) for k, v in marks.items()}, "timed_out_s": timeout_s}
            if "completed" not in marks and self._completed():
                marks["completed"] = time.monotonic() - started
            if "classification" not in marks and self.db["classifications"].count_documents({}) >= tags:
                marks["classification"] = time.monotonic() - started
            # The counts over the growing tables go every ``count_every_s`` only: on FerretDB (SQLite) a count reads
            # every document, and readers slow the projection's writes down.
            counting = time.monotonic() >= next_count
            if counting:
                next_count = time.monotonic() + self.count_every_s
            if counting and "mongodb" not in marks:
                if self.db["propagated_tags"].count_documents({"deleted": False}) == live:
                    marks["mongodb"] = time.monotonic() - started
            if counting and "trino" not in marks:
                self.cursor.execute(f'SELECT count(*) FROM "{schema}".propagated_tags WHERE NOT deleted')  # noqa: S608
                if self.cursor.fetchall()[0][0] == live:
                    marks["trino"] = time.monotonic() - started
            if self.receiver is not None:
                for kind in COUNTED:
                    at = self.receiver.first(kind, origin, "PII")
                    if at is not None:
                        marks[f"hook_{kind}"] = at - started
                if all(f"hook_{kind}" in marks for kind in COUNTED):
                    marks["notified"] = max(marks[f"hook_{kind}"] for kind in COUNTED)
            time.sleep(0.5)
        return {k: round(v, 3) for k, v in marks.items()}


def pipeline(
    settings: Settings, pairs: list[Pair], origins: list[str], reach: list[int], args: argparse.Namespace
) -> dict[str, Any]:
    tenant = f"bench-prop-{secrets.token_hex(3)}"
    registry = TenantRegistry.connect(settings)
    registry.create(tenant, Tier.DEDICATED)
    registry.set_state(tenant, TenantState.ACTIVE)
    names = TenantDirectory(registry, settings.lake_root, ttl_s=0).names(tenant)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    conn = trino_connect(settings, user="bench")
    cursor = conn.cursor()
    logs = Path(args.log_dir)
    logs.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {"tenant": tenant, "edges_seeded": len(pairs)}
    out["seed_lineage_s"] = round(seed_lineage(mongo, names, pairs), 1)
    job_cmd = ["-m", "processors.enrichment", "--tenant", tenant]
    proc_cmd = ["-m", "processors.propagation", "run", "--tenant", tenant, "--group", f"bench-{tenant}"]
    producer = EventProducer(settings)
    live = 0
    out["log_dir"] = str(logs)
    stack = ExitStack()
    receiver: Receiver | None = None
    try:
        if not args.no_outbound:
            secret = new_secret()
            receiver = stack.enter_context(Receiver(secret))
            # The subscription lives in the tenant's own database: see bench/outbound_child.py.
            subscribe(mongo, names.mongo_database, tenant, receiver.url, secret)
            stack.callback(unsubscribe, mongo, names.mongo_database, tenant)
            log = logs / f"{tenant}-outbound.log"
            stack.enter_context(outbound_runtime(settings, tenant, names.mongo_database, log, 300))
        with child(job_cmd, logs / f"{tenant}-job.log", logs / f"{tenant}-job.ready", 300):
            # Warm-up (not timed): the job creates and registers the tenant's tables on its first event.
            warm = {"urn": "urn:metalake:bench:local/warmup", "version": 1, "kind": "database", "name": "warmup"}
            event = new_event("io.metalake.asset.upserted.v1", tenant, warm, source="/bench/propagation")
            producer.publish([event], lambda e: names.priority_topic)
            deadline = time.monotonic() + 300
            while time.monotonic() < deadline:
                try:
                    cursor.execute(f'SELECT count(*) FROM "{trino_schema(settings, tenant)}".propagated_tags')  # noqa: S608
                    cursor.fetchall()
                    break
                except trino.exceptions.TrinoUserError:
                    time.sleep(1)
            started = time.monotonic()
            with child(proc_cmd, logs / f"{tenant}-processor.log", logs / f"{tenant}-processor.ready", 600):
                out["processor_start_s"] = round(time.monotonic() - started, 1)  # loads the lineage from MongoDB
                probe = Probe(settings, names, mongo, cursor, receiver)
                rounds: list[dict[str, Any]] = []
                for r, (origin, expected) in enumerate(zip(origins, reach, strict=True)):
                    live += expected
                    t0 = time.monotonic()
                    producer.publish([tag_event(tenant, origin, 1000 + r)], lambda e: names.priority_topic)
                    added = probe.round(t0, origin, r + 1, live, args.timeout)
                    rounds.append({"origin": origin, "propagated": expected, **added})
                    print(json.dumps({"round": r, **rounds[-1]}), file=sys.stderr, flush=True)
                    if "timed_out_s" in added:
                        break  # the next round's counts would include this one's stragglers
                probe.changes.close()
        out["rounds"] = rounds
        keys = ("classification", "completed", "mongodb", "trino", *(f"hook_{k}" for k in COUNTED), "notified")
        out["median_s"] = {
            k: round(statistics.median(r[k] for r in rounds), 3) for k in keys if all(k in r for r in rounds)
        }
        if receiver is not None:
            out["webhooks"] = {"received": len(receiver.deliveries), "rejected_signatures": receiver.rejected}
    finally:
        stack.close()
        producer.close()
        registry.delete(tenant)
        if not args.keep:
            mongo.drop_database(names.mongo_database)
        mongo.close()
        conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=10_000)
    parser.add_argument("--columns", type=int, default=20, help="columns per table (default 20: 200k columns)")
    parser.add_argument("--layers", type=int, default=10)
    parser.add_argument("--upstreams", type=int, default=3, help="upstream tables per table past the first layer")
    parser.add_argument("--repeat", type=int, default=5, help="runs of each in-memory measure (median)")
    parser.add_argument("--rounds", type=int, default=3, help="origins, tagged one per pipeline round")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per pipeline round")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--no-pipeline", action="store_true", help="only the in-memory measures")
    parser.add_argument("--no-outbound", action="store_true", help="do not time the notifications")
    parser.add_argument("--keep", action="store_true", help="keep the bench tenant's MongoDB database")
    parser.add_argument("--log-dir", default=".stack/logs/bench")
    args = parser.parse_args()

    settings = load_settings(Settings)
    started = time.perf_counter()
    table_edges, column_edges = build_graph(args.tables, args.columns, args.layers, args.upstreams, args.seed)
    pairs = table_edges + column_edges
    # Column 0 of the first first-layer tables that feed anything (a small graph may leave a table unread).
    feeding = sorted({up for up, _ in table_edges if "/l0/" in up}, key=lambda u: int(u.rsplit("/t", 1)[1]))
    origins = [f"{up}/c0" for up in feeding[: args.rounds]]
    p = settings.propagation
    limits = Limits(
        max_depth=max(p.max_depth, args.layers),
        max_fanout=p.max_fanout,
        max_reached=max(p.max_reached, args.tables * args.columns),
        time_budget_s=60,
    )
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "graph": {
            "tables": args.tables,
            "columns": args.tables * args.columns,
            "table_edges": len(table_edges),
            "column_edges": len(column_edges),
            "build_s": round(time.perf_counter() - started, 2),
        },
        "origins": len(origins),
        "in_memory": in_memory(pairs, origins, args.repeat, limits),
    }
    print(json.dumps(report["in_memory"]), file=sys.stderr, flush=True)
    if not args.no_pipeline:
        if not all(report["in_memory"]["reached_per_origin"]):
            raise SystemExit("the tag reaches nothing on this graph: nothing to time")
        report["pipeline"] = pipeline(settings, pairs, origins, report["in_memory"]["reached_per_origin"], args)
        floor = report["in_memory"]["floor_bfs_s"]
        report["ratio_to_floor"] = {k: round(v / floor) for k, v in report["pipeline"]["median_s"].items() if floor}
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
