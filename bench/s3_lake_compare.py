"""The lake on S3 against the local-folder lake, same run: a dedicated tenant's streaming job on each (one after the
other, so they do not share the cores), measured the same way.

- throughput: a backlog of ``--events`` asset events published at once, timed from the first publish until the job's
  ``enrichment.lake_batch_done`` records sum to all of them (events/s into Delta);
- freshness: ``--probes`` asset updates one at a time, each timed from Kafka's acknowledgement until Trino returns its
  version through the tenant's ``assets`` table (p50 / max).

A first figure, not the streaming bench (bench/stream_bench.py, which runs the pooled job on the configured lake):
the stack must be up with an S3 store reachable with the lake's ``LAKE__S3__*`` settings (``metalake stack up
seaweedfs``), and Spark's s3a jars fetched (deploy/local/fetch/spark-s3.sh).

    .stack/venv/bin/python bench/s3_lake_compare.py --bucket metalake-bench --events 3000 --probes 15
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import trino

from metalake.events import CloudEvent, new_event
from metalake.kafka import EventProducer
from metalake.kafka.admin import ensure_topics
from metalake.lake_uri import LakeRoot, S3Path
from metalake.s3 import S3Client
from metalake.settings import load_settings
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from tenants.naming import TenantNames, names_for
from tenants.trino_schemas import trino_schema

LAKE_EVENT = "enrichment.lake_batch_done"


def _upsert(tenant: str, i: int, version: int) -> CloudEvent:
    urn = asset_urn("pg", "bench", "db", "public", f"t{i}")
    return new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": urn, "version": version, "kind": "table", "name": f"t{i}"},
        source="/bench/s3",
    )


def _lake_events(log: Path) -> int:
    total = 0
    for line in log.read_text(errors="replace").splitlines():
        line = line[line.find('{"') :] if '{"' in line else ""
        try:
            record = json.loads(line) if line else {}
        except json.JSONDecodeError:
            continue
        if record.get("event") == LAKE_EVENT:
            total += int(record.get("events") or 0)
    return total


def _wait(what: str, probe: Any, timeout_s: float, interval_s: float = 0.1) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if probe():
            return
        time.sleep(interval_s)
    raise SystemExit(f"timed out waiting for {what}")


def run_side(settings: Settings, root: LakeRoot, label: str, events: int, probes: int, workdir: Path) -> dict[str, Any]:
    tenant = f"bench-{label}-{secrets.token_hex(3)}"
    names: TenantNames = names_for(tenant, root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    log, ready = workdir / f"{label}.log", workdir / f"{label}.ready"
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "METALAKE_LAKE__ROOT": str(root)}
    argv = [sys.executable, "-m", "processors.enrichment", "--tenant", tenant, "--ready-file", str(ready)]
    with log.open("ab") as out:
        job = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        _wait(f"{label} job ready", ready.exists, 300)
        cursor = trino.dbapi.connect(
            host=settings.trino.host, port=settings.trino.port, user="metalake-tests", catalog=settings.trino.catalog
        ).cursor()
        with EventProducer(settings) as producer:
            # Warm-up: the first batch creates the tables and registers them in Trino.
            producer.publish([_upsert(tenant, 0, 1)], lambda e: names.priority_topic)
            _wait(f"{label} warm-up", lambda: _lake_events(log) >= 1, 300)
            backlog = [_upsert(tenant, i, 2) for i in range(events)]
            started = time.monotonic()
            producer.publish(backlog, lambda e: names.priority_topic)
            _wait(f"{label} backlog", lambda: _lake_events(log) >= events + 1, 600)
            seconds = time.monotonic() - started
            latencies = []
            probe_sql = f'SELECT version FROM "{trino_schema(settings, names.tenant_id)}".assets WHERE urn = ?'  # noqa: S608 - fixed names
            for p in range(probes):
                version = 10 + p
                producer.publish([_upsert(tenant, 0, version)], lambda e: names.priority_topic)
                acked = time.monotonic()

                def seen(v: int = version, sql: str = probe_sql) -> bool:
                    cursor.execute(sql, [asset_urn("pg", "bench", "db", "public", "t0")])
                    rows = cursor.fetchall()
                    return bool(rows) and int(rows[0][0]) >= v

                _wait(f"{label} probe {p}", seen, 120, interval_s=0.05)
                latencies.append(time.monotonic() - acked)
    finally:
        job.send_signal(signal.SIGTERM)
        try:
            job.wait(timeout=60)
        except subprocess.TimeoutExpired:
            job.kill()
    return {
        "lake": str(root),
        "events": events,
        "seconds": round(seconds, 2),
        "events_per_s": round(events / seconds, 1),
        "freshness_p50_s": round(statistics.median(latencies), 2),
        "freshness_max_s": round(max(latencies), 2),
        "probes": probes,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--bucket", default="metalake-bench")
    parser.add_argument("--events", type=int, default=3000)
    parser.add_argument("--probes", type=int, default=15)
    parser.add_argument("--local-root", type=Path, default=None, help="the local side's lake (default: lake.root)")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--workdir", type=Path, default=None, help="the jobs' logs (default: .stack/bench/s3-<time>)")
    args = parser.parse_args()
    use_checkout_stack()
    settings = load_settings(Settings)
    S3Client.from_settings(settings.lake.s3).create_bucket(args.bucket)
    workdir = args.workdir or settings.local_stack_dir / "bench" / f"s3-{int(time.time())}"
    workdir.mkdir(parents=True, exist_ok=True)
    local = args.local_root.resolve() if args.local_root else settings.lake_root
    s3 = S3Path.parse(f"s3a://{args.bucket}/run-{secrets.token_hex(3)}")
    result = {
        "local": run_side(settings, local, "local", args.events, args.probes, workdir),
        "s3": run_side(settings, s3, "s3", args.events, args.probes, workdir),
    }
    text = json.dumps(result, indent=1)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")


if __name__ == "__main__":
    main()
