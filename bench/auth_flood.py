"""The token endpoint and an authenticated read while anonymous clients flood the API, for two checkouts side by side.

Each round starts the admin API of each checkout (``--tree NAME=PATH``, at least two: the code before and after a
change) in a fresh process on loopback, against the running stack's control plane, and measures in turn:

  quiet  a legitimate client alone: ``POST /oauth/token`` (its real credentials) and ``GET /v1/tenants/{t}`` with the
         token, one after the other, ``--legit`` connections;
  flood  the same client while ``--flood`` anonymous connections, from another loopback address (127.0.0.2, so a
         throttle keyed on the peer can tell them apart), send without pause, in turn:
           - token requests for the real client id under a new spelling each time (percent-encoded letters), with a
             wrong secret (before issue 12 each one cost an scrypt run: the throttle keyed the id as spelled);
           - token requests for random client ids;
           - an 8 MiB JSON body, without credentials, to an authenticated route (before: read and parsed, then 401).

Reported per checkout and phase (median over rounds): the legitimate operations' p50/p99 latency and how many
succeeded, the flood's answers by status, and the API process's peak resident memory (VmHWM). The load generator
shares the two cores with the server: compare the checkouts and the phases, not the absolute figures. The
legitimate connections pace themselves (--interval) under their client's rate limit.
Needs the stack (Kafka, FerretDB): .stack/venv/bin/metalake stack up

    .stack/venv/bin/python bench/auth_flood.py --tree before=/tmp/before --tree after=. --seconds 10 --rounds 3
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import secrets
import signal
import socket
import statistics
import string
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import httpx

from ops.stack.paths import use_checkout_stack

BIG_BODY = b'{"sql": "' + b"x" * (8 * 1024 * 1024) + b'"}'


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _spelling(client_id: str) -> str:
    """The same id, some letters percent-encoded at random: a new spelling nearly every time."""
    return "".join(f"%{ord(c):02X}" if c.isalnum() and random.random() < 0.5 else c for c in client_id)


@dataclass
class Phase:
    token_ms: list[float] = field(default_factory=list)
    read_ms: list[float] = field(default_factory=list)
    legit_failures: Counter[int] = field(default_factory=Counter)
    flood: Counter[str] = field(default_factory=Counter)
    peak_rss_mb: float = 0.0


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


async def _legit(
    base: str, client_id: str, secret: str, tenant: str, stop: float, phase: Phase, interval: float
) -> None:
    # Paced under the client's own rate limit (api.rate_limit_per_s): what is measured is the wait, not throttling.
    async with httpx.AsyncClient(base_url=base, timeout=30) as http:
        while time.monotonic() < stop:
            started = time.monotonic()
            await _one_legit(http, client_id, secret, tenant, phase)
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


async def _one_legit(http: httpx.AsyncClient, client_id: str, secret: str, tenant: str, phase: Phase) -> None:
    t0 = time.perf_counter()
    answer = await http.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, secret))
    phase.token_ms.append((time.perf_counter() - t0) * 1000)
    if answer.status_code != 200:
        phase.legit_failures[answer.status_code] += 1
        return
    token = answer.json()["access_token"]
    t0 = time.perf_counter()
    read = await http.get(f"/v1/tenants/{tenant}", headers={"Authorization": f"Bearer {token}"})
    phase.read_ms.append((time.perf_counter() - t0) * 1000)
    if read.status_code != 200:
        phase.legit_failures[read.status_code] += 1


async def _flooder(base: str, client_id: str, tenant: str, stop: float, phase: Phase, kind: int) -> None:
    transport = httpx.AsyncHTTPTransport(local_address="127.0.0.2")
    async with httpx.AsyncClient(base_url=base, timeout=30, transport=transport) as http:
        while time.monotonic() < stop:
            try:
                if kind == 0:
                    answer = await http.post(
                        "/oauth/token",
                        data={"grant_type": "client_credentials"},
                        auth=(_spelling(client_id), secrets.token_urlsafe(16)),
                    )
                    label = "token-spelling"
                elif kind == 1:
                    rand = "".join(random.choices(string.ascii_lowercase, k=20))
                    answer = await http.post(
                        "/oauth/token", data={"grant_type": "client_credentials"}, auth=(rand, "wrong")
                    )
                    label = "token-random-id"
                else:
                    label = "8MiB-anonymous"
                    try:
                        answer = await http.post(
                            f"/v1/tenants/{tenant}/sql",
                            content=BIG_BODY,
                            headers={"content-type": "application/json"},
                        )
                    except (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError):
                        # Answered (401, Connection: close) and closed before the client finished sending.
                        phase.flood[f"{label} closed-early"] += 1
                        continue
                phase.flood[f"{label} {answer.status_code}"] += 1
            except httpx.HTTPError as exc:
                phase.flood[f"error {type(exc).__name__}"] += 1
                await asyncio.sleep(0.01)


async def _run_phase(
    base: str,
    pid: int,
    client_id: str,
    secret: str,
    tenant: str,
    seconds: float,
    legit: int,
    flood: int,
    kinds: list[int],
    interval: float,
) -> Phase:
    phase = Phase()
    stop = time.monotonic() + seconds
    tasks = [_legit(base, client_id, secret, tenant, stop, phase, interval) for _ in range(legit)]
    tasks += [_flooder(base, client_id, tenant, stop, phase, kinds[i % len(kinds)]) for i in range(flood)]
    await asyncio.gather(*tasks)
    phase.peak_rss_mb = _peak_rss_mb(pid)
    return phase


def _start_api(tree: Path, port: int) -> subprocess.Popen[bytes]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(tree)
    env["METALAKE_API__RESUME"] = "false"
    proc = subprocess.Popen(
        [sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"],
        cwd=tree,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.HTTPError:
            pass
        time.sleep(0.3)
    proc.kill()
    raise SystemExit(f"the API of {tree} did not answer /healthz within 60 s")


def _stop(proc: subprocess.Popen[bytes]) -> None:
    os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


def _setup(tree: Path) -> tuple[str, str, str]:
    """A pooled tenant (provisioned through the API, as a platform admin would) and an admin client of it."""
    from control.auth.clients import ClientStore, Role
    from metalake.mongo import mongo_client
    from metalake.settings import load_settings
    from ops.settings import Settings
    from tenants.naming import CONTROL_DATABASE

    settings = load_settings(Settings)
    mongo = mongo_client(settings)
    store = ClientStore(mongo[CONTROL_DATABASE])
    admin, admin_secret = store.create(None, Role("platform-admin"), "bench auth_flood")
    tenant = f"bench-auth-{secrets.token_hex(3)}"
    port = _free_port()
    proc = _start_api(tree, port)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60) as http:
            form = {"grant_type": "client_credentials"}
            token = http.post("/oauth/token", data=form, auth=(admin.client_id, admin_secret)).json()["access_token"]
            headers = {"Authorization": f"Bearer {token}"}
            created = http.post("/v1/tenants", json={"id": tenant, "tier": "pooled"}, headers=headers)
            if created.status_code >= 300:
                raise SystemExit(f"creating the bench tenant failed: {created.status_code} {created.text}")
            for _ in range(120):
                if http.get(f"/v1/tenants/{tenant}", headers=headers).json().get("state") == "active":
                    break
                time.sleep(0.5)
            else:
                raise SystemExit(f"tenant {tenant} did not become active within 60 s")
    finally:
        _stop(proc)
    client, secret = store.create(tenant, Role("admin"), "bench auth_flood")
    mongo.close()
    return tenant, client.client_id, secret


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tree", action="append", required=True, help="NAME=PATH of a checkout whose API to run")
    parser.add_argument("--seconds", type=float, default=10.0, help="length of each phase")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--legit", type=int, default=2, help="legitimate connections")
    parser.add_argument("--flood", type=int, default=24, help="anonymous flooding connections")
    parser.add_argument(
        "--kinds", default="0,1,2", help="flood kinds: 0 id spellings, 1 random ids, 2 8 MiB anonymous bodies"
    )
    parser.add_argument(
        "--interval", type=float, default=0.25, help="seconds between a legit connection's token+read pairs"
    )
    args = parser.parse_args()
    use_checkout_stack()
    trees = [(name, Path(path).resolve()) for name, _, path in (t.partition("=") for t in args.tree)]
    tenant, client_id, secret = _setup(trees[-1][1])
    print(f"# {datetime.now(UTC):%Y-%m-%d %H:%M} UTC, {platform.node()}, {os.cpu_count()} CPUs, tenant {tenant}")
    results: dict[tuple[str, str], list[Phase]] = {}
    for rnd in range(args.rounds):
        for name, tree in trees:
            port = _free_port()
            proc = _start_api(tree, port)
            try:
                base = f"http://127.0.0.1:{port}"
                for label, flood in (("quiet", 0), ("flood", args.flood)):
                    phase = asyncio.run(
                        _run_phase(
                            base,
                            proc.pid,
                            client_id,
                            secret,
                            tenant,
                            args.seconds,
                            args.legit,
                            flood,
                            [int(k) for k in args.kinds.split(",")],
                            args.interval,
                        )
                    )
                    results.setdefault((name, label), []).append(phase)
                    print(
                        f"round {rnd + 1} {name:>8} {label}: token p50 {_pct(phase.token_ms, 0.5):.1f} ms "
                        f"p99 {_pct(phase.token_ms, 0.99):.1f} ms ({len(phase.token_ms)}), read p50 "
                        f"{_pct(phase.read_ms, 0.5):.1f} ms p99 {_pct(phase.read_ms, 0.99):.1f} ms "
                        f"({len(phase.read_ms)}), legit refused {dict(phase.legit_failures)}, "
                        f"peak RSS {phase.peak_rss_mb:.0f} MiB, flood {dict(phase.flood)}",
                        flush=True,
                    )
            finally:
                _stop(proc)
    print(
        "\n| checkout | phase | token p50 / p99 (ms) | tokens | read p50 / p99 (ms) | reads | legit refused | "
        "peak RSS (MiB) | flood answers |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for (name, label), phases in results.items():
        med = statistics.median
        flood_total: Counter[str] = Counter()
        for phase in phases:
            flood_total.update(phase.flood)
        answers = ", ".join(f"{k}: {v // len(phases)}" for k, v in sorted(flood_total.items())) or "-"
        print(
            f"| {name} | {label} | {med(_pct(p.token_ms, 0.5) for p in phases):.1f} / "
            f"{med(_pct(p.token_ms, 0.99) for p in phases):.1f} | {med(len(p.token_ms) for p in phases):.0f} | "
            f"{med(_pct(p.read_ms, 0.5) for p in phases):.1f} / {med(_pct(p.read_ms, 0.99) for p in phases):.1f} | "
            f"{med(len(p.read_ms) for p in phases):.0f} | "
            f"{med(sum(p.legit_failures.values()) for p in phases):.0f} | "
            f"{med(p.peak_rss_mb for p in phases):.0f} | {answers} |"
        )


if __name__ == "__main__":
    main()
