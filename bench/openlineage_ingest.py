"""OpenLineage in: events accepted per second on ``POST /api/v1/lineage``, against the generic ingest API, same run.

One worker (``connectors.runtime.worker.create_app``, the real stack's Kafka and FerretDB) on loopback, measured in
turn (alternating, --rounds times) on:
  openlineage  ``POST /api/v1/lineage``: one dbt-shaped COMPLETE RunEvent per request (2 inputs, 1 output, schema and
               column-lineage facets) -> 19 metalake events (3 tables, 10 columns, 2 table and 4 column edges);
  ingest       ``POST /v1/events``: the same 19 metalake events, already mapped, as a JSON array of CloudEvents.
Both authenticate with one write key and answer only after Kafka confirmed (acks=all). Each request is a new run (a
new run id and event time), over the same datasets, so the streaming job folds them into few rows. The load
generator (asyncio + httpx, --concurrency connections) shares the two cores with the worker: compare the two, not
the absolute figures. Needs the stack (Kafka, FerretDB): .stack/venv/bin/metalake stack up

    .stack/venv/bin/python bench/openlineage_ingest.py --requests 200 --concurrency 8 --rounds 2
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import secrets
import signal
import socket
import statistics
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ops.stack.paths import use_checkout_stack  # noqa: E402

NAMESPACE = "postgres://warehouse.bench:5432"
START = datetime(2026, 1, 1, tzinfo=UTC)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _dataset(name: str, columns: list[str], lineage: dict[str, Any] | None = None) -> dict[str, Any]:
    facets: dict[str, Any] = {
        "schema": {
            "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/dbt",
            "_schemaURL": "https://openlineage.io/spec/facets/1-1-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet",
            "fields": [{"name": c, "type": "varchar"} for c in columns],
        }
    }
    if lineage is not None:
        facets["columnLineage"] = {
            "_producer": "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/dbt",
            "_schemaURL": "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json",
            "fields": lineage,
        }
    return {"namespace": NAMESPACE, "name": name, "facets": facets}


def _field(name: str, column: str) -> dict[str, Any]:
    return {
        "inputFields": [
            {"namespace": NAMESPACE, "name": name, "field": column, "transformations": [{"type": "DIRECT"}]}
        ]
    }


def run_event(i: int) -> dict[str, Any]:
    """A dbt model's COMPLETE event; ``i`` makes the run (id, time) distinct."""
    lineage = {
        "order_id": _field("jaffle.dev.stg_orders", "order_id"),
        "customer_id": _field("jaffle.dev.stg_orders", "customer_id"),
        "order_date": _field("jaffle.dev.stg_orders", "order_date"),
        "amount": _field("jaffle.dev.stg_payments", "amount"),
    }
    return {
        "eventType": "COMPLETE",
        "eventTime": (START + timedelta(milliseconds=i)).isoformat(),
        "producer": "https://github.com/OpenLineage/OpenLineage/tree/1.24.2/integration/dbt",
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(uuid.UUID(int=i, version=4))},
        "job": {"namespace": "dbt", "name": "jaffle_shop.dev.model.jaffle_shop.orders"},
        "inputs": [
            _dataset("jaffle.dev.stg_orders", ["order_id", "customer_id", "order_date"]),
            _dataset("jaffle.dev.stg_payments", ["order_id", "amount", "method"]),
        ],
        "outputs": [_dataset("jaffle.dev.orders", ["order_id", "customer_id", "order_date", "amount"], lineage)],
    }


def ingest_events(tenant: str, i: int) -> list[dict[str, Any]]:
    """The metalake events the worker makes of ``run_event(i)``, as structured CloudEvents for ``POST /v1/events``."""
    from connectors.openlineage.mapping import body_digest, map_event

    body = json.dumps(run_event(i)).encode()
    mapped = map_event(json.loads(body), tenant, body_digest(body), max_events=10_000)
    return [
        {
            "specversion": "1.0",
            "id": e.id,
            "source": e.source,
            "type": e.type,
            "time": e.time.isoformat(),
            "tenantid": tenant,
            "data": e.data,
        }
        for e in mapped.events
    ]


def _serve(port: int) -> None:
    import uvicorn

    from connectors.runtime.worker import create_app
    from metalake.settings import load_settings
    from ops.settings import Settings

    uvicorn.run(create_app(load_settings(Settings)), host="127.0.0.1", port=port, log_level="warning", access_log=False)


async def _load(url: str, bodies: list[bytes], key: str, concurrency: int) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    queue = iter(bodies)
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    headers = {"content-type": "application/json", "authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:

        async def worker() -> None:
            for body in queue:
                t0 = time.perf_counter()
                resp = await client.post(url, content=body, headers=headers)
                latencies.append(time.perf_counter() - t0)
                statuses[resp.status_code] = statuses.get(resp.status_code, 0) + 1

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - t0
    latencies.sort()
    return {
        "rps": len(latencies) / elapsed,
        "p50_ms": 1000 * latencies[len(latencies) // 2],
        "p99_ms": 1000 * latencies[min(len(latencies) - 1, int(len(latencies) * 0.99))],
        "statuses": statuses,
    }


def _wait_up(port: int, timeout_s: float = 60) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.2)
    raise SystemExit(f"server on port {port} did not start within {timeout_s:.0f}s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=200, help="requests per measurement")
    parser.add_argument("--concurrency", type=int, default=8, help="concurrent connections")
    parser.add_argument("--rounds", type=int, default=2, help="measurements per endpoint (median reported)")
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve(args.port)
        return

    from control.connectors.store import ControlStore
    from metalake.mongo import mongo_client
    from metalake.sealing import sealer_for
    from metalake.settings import load_settings
    from ops.settings import Settings
    from tenants.naming import CONTROL_DATABASE

    settings = load_settings(Settings)
    tenant = f"bench-ol-{secrets.token_hex(3)}"
    _info, key = ControlStore(mongo_client(settings)[CONTROL_DATABASE], sealer_for(settings)).write_keys.create(tenant)
    per_request = len(ingest_events(tenant, 0))
    port = _free_port()
    server = subprocess.Popen(
        [sys.executable, __file__, "--serve", "--port", str(port)],
        # The checkout's code, not whichever metalake the interpreter has installed.
        env={**os.environ, "METALAKE_TELEMETRY__LOG_LEVEL": "WARNING", "PYTHONPATH": str(ROOT)},
    )
    results: dict[str, list[dict[str, Any]]] = {"openlineage": [], "ingest": []}
    try:
        _wait_up(port)
        n = 0
        for round_no in range(args.rounds + 1):  # round 0 warms the worker up and is not counted
            for kind in ("openlineage", "ingest"):
                count = 20 if round_no == 0 else args.requests
                ids = range(n, n + count)
                n += count
                if kind == "openlineage":
                    path, bodies = "/api/v1/lineage", [json.dumps(run_event(i)).encode() for i in ids]
                else:
                    path, bodies = "/v1/events", [json.dumps(ingest_events(tenant, i)).encode() for i in ids]
                url = f"http://127.0.0.1:{port}{path}"
                result = asyncio.run(_load(url, bodies, key.get_secret_value(), args.concurrency))
                if round_no == 0:
                    continue
                results[kind].append(result)
                print(
                    f"round {round_no} {kind:11}: {result['rps']:6.1f} req/s = {result['rps'] * per_request:7.0f} "
                    f"events/s  p50 {result['p50_ms']:6.1f} ms  p99 {result['p99_ms']:6.1f} ms  "
                    f"statuses {result['statuses']}",
                    flush=True,
                )
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(timeout=30)
    summary = {
        kind: {
            "requests_per_s_median": round(statistics.median(r["rps"] for r in runs), 1),
            "events_per_s_median": round(statistics.median(r["rps"] for r in runs) * per_request),
            "p50_ms_median": round(statistics.median(r["p50_ms"] for r in runs), 1),
            "p99_ms_median": round(statistics.median(r["p99_ms"] for r in runs), 1),
        }
        for kind, runs in results.items()
    }
    print(
        json.dumps(
            {
                "when": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": f"{platform.machine()}, {os.cpu_count()} cpus",
                "metalake_events_per_request": per_request,
                "requests": args.requests,
                "concurrency": args.concurrency,
                "rounds": args.rounds,
                "summary": summary,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    use_checkout_stack()
    main()
