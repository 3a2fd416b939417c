"""Webhook receiver throughput and latency at saturation, against a bare ASGI floor in the same run.

Two servers on loopback, each measured in turn (alternating, --rounds times):
  real  the worker's ``POST /webhooks/monte-carlo/{tenant}``: body limit, control-plane lookup, Monte Carlo signature
        check, mapping to CloudEvents, dedup record in MongoDB, Kafka publish with acks=all confirmed before 202;
  bare  a minimal ASGI app that reads the body and runs only the same signature check, then answers 202.
Each request carries a distinct incident (so nothing is answered as a duplicate), signed as Monte Carlo signs.
The load generator (asyncio + httpx, --concurrency connections) shares the two cores with the server: compare the
ratio, not the absolute figures. Needs the stack (Kafka, FerretDB): .stack/venv/bin/metalake stack up

    .stack/venv/bin/python bench/webhook_bench.py --seconds 10 --concurrency 16 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
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
import urllib.parse
from datetime import UTC, datetime
from typing import Any

import httpx

from ops.stack.paths import use_checkout_stack

SECRET = "bench-" + "x" * 40


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _payload(i: int) -> bytes:
    body = {
        "account": {"id": "9a59c6f1-203a-4c72-8cd7-132db7f21b92"},
        "action": "incident",
        "type": "open_anomaly_incident",
        "version": "v0.1",
        "payload": {
            "incident_id": f"00000000-0000-4000-8000-{i:012d}",
            "group_id": "analytics:prod",
            "url": f"https://getmontecarlo.com/incidents/{i}",
            "event_list": [{"event_details": "Has 42 rows vs. 101 expected", "table_name": "orders"}],
        },
    }
    return json.dumps(body).encode()


def _sign(raw: bytes) -> str:
    message = urllib.parse.urlencode(json.loads(raw)).encode("utf8")
    return hmac.new(SECRET.encode(), message, hashlib.sha512).hexdigest()


# -- servers (run in a child process) ---------------------------------------------------------------------------------


def _serve_bare(port: int) -> None:
    import uvicorn

    from connectors.montecarlo.signature import header_value, verify_signature
    from control.connectors.plugin import parse_json

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        body = b""
        more = True
        while more:
            message = await receive()
            body += message.get("body", b"")
            more = message.get("more_body", False)
        headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
        try:
            verify_signature(body, parse_json(body), header_value(headers), [SECRET.encode()])
            status = 202
        except Exception:  # noqa: BLE001 - the floor answers 401 for anything that fails the check
            status = 401
        await send({"type": "http.response.start", "status": status, "headers": [(b"content-type", b"text/plain")]})
        await send({"type": "http.response.body", "body": b""})

    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", access_log=False)


def _serve_real(port: int, tenant: str) -> None:
    import uvicorn
    from pydantic import SecretStr

    from connectors.runtime.worker import create_app
    from control.connectors.store import ControlStore
    from metalake.mongo import mongo_client
    from metalake.sealing import sealer_for
    from metalake.settings import load_settings
    from ops.settings import Settings
    from tenants.naming import CONTROL_DATABASE

    settings = load_settings(Settings)
    store = ControlStore(mongo_client(settings)[CONTROL_DATABASE], sealer_for(settings))
    store.put_connector(tenant, "mc", "montecarlo", {"default_platform": "snowflake", "default_instance": "bench"})
    store.secrets.add_webhook(tenant, "mc", SecretStr(SECRET))
    uvicorn.run(create_app(settings), host="127.0.0.1", port=port, log_level="warning", access_log=False)


# -- load -------------------------------------------------------------------------------------------------------------


async def _load(url: str, seconds: float, concurrency: int, start: int) -> dict[str, Any]:
    latencies: list[float] = []
    statuses: dict[int, int] = {}
    counter = iter(range(start, start + 10_000_000))
    deadline = time.perf_counter() + seconds
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(limits=limits, timeout=30) as client:

        async def worker() -> None:
            while time.perf_counter() < deadline:
                raw = _payload(next(counter))
                headers = {"content-type": "application/json", "x-mcd-signature": _sign(raw)}
                t0 = time.perf_counter()
                resp = await client.post(url, content=raw, headers=headers)
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
    parser.add_argument("--seconds", type=float, default=10.0, help="duration of each measurement")
    parser.add_argument("--concurrency", type=int, default=16, help="concurrent connections")
    parser.add_argument("--rounds", type=int, default=3, help="measurements per server (median reported)")
    parser.add_argument("--serve", choices=["real", "bare"], help=argparse.SUPPRESS)
    parser.add_argument("--port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--tenant", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve == "bare":
        _serve_bare(args.port)
        return
    if args.serve == "real":
        _serve_real(args.port, args.tenant)
        return

    tenant = f"bench-{secrets.token_hex(3)}"
    results: dict[str, list[dict[str, Any]]] = {"real": [], "bare": []}
    offset = 0
    for round_no in range(args.rounds):
        for kind in ("real", "bare"):
            port = _free_port()
            cmd = [sys.executable, __file__, "--serve", kind, "--port", str(port), "--tenant", tenant]
            server = subprocess.Popen(cmd, env={**os.environ, "METALAKE_TELEMETRY__LOG_LEVEL": "WARNING"})
            try:
                _wait_up(port)
                path = f"/webhooks/monte-carlo/{tenant}" if kind == "real" else "/"
                asyncio.run(_load(f"http://127.0.0.1:{port}{path}", 1.0, args.concurrency, 10_000_000 + offset))
                offset += 100_000
                result = asyncio.run(_load(f"http://127.0.0.1:{port}{path}", args.seconds, args.concurrency, offset))
                offset += 1_000_000
            finally:
                server.send_signal(signal.SIGTERM)
                server.wait(timeout=30)
            results[kind].append(result)
            print(
                f"round {round_no + 1} {kind:4}: {result['rps']:7.1f} req/s  p50 {result['p50_ms']:6.1f} ms  "
                f"p99 {result['p99_ms']:6.1f} ms  statuses {result['statuses']}",
                flush=True,
            )
    summary = {
        kind: {
            "rps_median": round(statistics.median(r["rps"] for r in runs), 1),
            "p50_ms_median": round(statistics.median(r["p50_ms"] for r in runs), 1),
            "p99_ms_median": round(statistics.median(r["p99_ms"] for r in runs), 1),
        }
        for kind, runs in results.items()
    }
    print(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": f"{platform.node()} {platform.machine()} {os.cpu_count()} cpu",
                "seconds": args.seconds,
                "concurrency": args.concurrency,
                "results": summary,
                "throughput_ratio_real_to_bare": round(
                    summary["real"]["rps_median"] / summary["bare"]["rps_median"], 3
                ),
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
