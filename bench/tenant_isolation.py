"""One tenant floods the platform; another tenant's ingest and SQL latency, against the same tenant alone.

Runs against the whole local platform as ``make demo`` leaves it (``metalake stack up --with-processors``: the
streaming job, the admin API, the connector worker, the propagation, outbound and access processors), loopback only.
Setup, through the admin API with the demo's platform-admin client (``bench/tenant_isolation_setup.py``): two pooled
tenants, ``victim-<hex>`` (a write key, a read-only client) and ``noisy-<hex>`` (a write key, --noisy-admins admin
clients, --noisy-assets tables in its catalog, --dead-letters invalid records on its event topic that the streaming
job dead-letters, and a webhook subscription to a receiver this script runs on 127.0.0.1 that takes each delivery and
then trickles its answer, one byte every --trickle-interval seconds: ``bench/trickle_receiver.py``). The credentials
are kept owner-only in ``.stack/bench-tenant-isolation.json``; ``--reuse`` takes the tenants from there.

Each round measures two phases of --seconds each, after --settle seconds of rest:
  quiet  the victim alone, from 127.0.0.1: ``POST /v1/events`` on the connector worker (a write key, --events table
         upserts per request, one every --ingest-interval s) and ``POST /v1/tenants/{victim}/sql`` on the API (a
         read-only client's token, --sql, one every --sql-interval s), each request timed;
  flood  the same, while the noisy tenant, from 127.0.0.2 (so throttles keyed on the peer can tell them apart):
           - posts OpenLineage run events to ``POST /api/v1/lineage`` without pause, --ol-conns connections, in turn
             ``deep`` (a schema facet nested --ol-depth levels, --ol-width columns and one struct per level, names of
             --ol-name-bytes: the mapping's name and URN amplification, issue 21 item 2; refused) and ``wide``
             (--ol-wide-columns flat columns: accepted, that many metalake events each);
           - lists its dead letters (``GET /v1/tenants/{noisy}/dead-letters?limit=500``: Kafka scans and delta-rs reads)
             on --dlq-conns connections, each with its own admin client, waiting out the Retry-After of a 429 or
             503 (at most 1 s; --dlq-ignore-retry-after hammers instead);
           - tags its tables (``POST .../assets/tags``, a new tag each time, one every --tag-interval s), each tag a
             change its webhook subscription must deliver to the trickling receiver.

Reported per phase, medians over --rounds: the victim's ingest and SQL p50/p99 (nearest rank over the phase's
requests: with few requests p99 is the slowest one) and failures, the flood's answers by status (per round), the
1-minute load average at the phase's end and the CPU busy share over it; then the flood/quiet ratio of each p99 (the
goal: within 2x), the webhook receiver's connections, and a markdown table for docs/benchmarks.md with the command
line and the date. The load generator shares the machine's cores with the platform: compare phases of one run.

    .stack/venv/bin/python bench/tenant_isolation.py --rounds 3 --seconds 20
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import platform
import socket
import sys
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Coroutine
from contextlib import AsyncExitStack
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's code, not whichever metalake the interpreter has installed

# bench/ is on sys.path when this runs as a script.
from tenant_isolation_report import (  # noqa: E402
    HEADER,
    Phase,
    busy_percent,
    command_line,
    cpu_times,
    markdown_rows,
    phase_line,
    summarize,
    verdict,
    webhook_line,
)
from tenant_isolation_setup import (  # noqa: E402
    Credentials,
    admin_session,
    disable_subscription,
    ingest_batch,
    lineage_event,
    load_state,
    point_subscription,
    provision,
    reader_works,
    save_state,
    seed_dead_letters,
    state_path,
)
from trickle_receiver import TrickleReceiver, TrickleStats  # noqa: E402

from metalake.settings import load_settings  # noqa: E402
from ops.settings import Settings  # noqa: E402
from ops.stack.paths import use_checkout_stack  # noqa: E402

NOISY_ADDRESS = "127.0.0.2"
Task = Coroutine[Any, Any, None]


@dataclass(frozen=True)
class Targets:
    api: str
    connect: str


# -- arguments --------------------------------------------------------------------------------------------------------


def _ranged(kind: type[int] | type[float], low: float, high: float) -> Callable[[str], Any]:
    def parse(text: str) -> int | float:
        value = kind(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be between {low:g} and {high:g}")
        return value

    return parse


def _kinds(text: str) -> list[str]:
    kinds = [k.strip() for k in text.split(",") if k.strip()]
    if not kinds or any(k not in ("deep", "wide") for k in kinds):
        raise argparse.ArgumentTypeError("a comma-separated list of deep and wide")
    return kinds


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--rounds", type=_ranged(int, 1, 50), default=3, help="rounds of quiet + flood (medians reported)")
    add("--seconds", type=_ranged(float, 1, 600), default=20.0, help="length of each phase")
    add("--settle", type=_ranged(float, 0, 300), default=15.0, help="rest before each phase (the flood's backlog)")
    add("--reuse", action="store_true", help="reuse the tenants of the last run (.stack/bench-tenant-isolation.json)")
    add("--events", type=_ranged(int, 1, 1000), default=20, help="events per victim ingest request")
    add("--ingest-interval", type=_ranged(float, 0.01, 60), default=0.1, help="seconds between victim ingests")
    add("--sql", default="SELECT count(*) FROM assets", help="the victim's query")
    add("--sql-interval", type=_ranged(float, 0.05, 60), default=0.5, help="seconds between victim queries")
    add("--ol-conns", type=_ranged(int, 0, 64), default=4, help="noisy OpenLineage connections")
    add("--ol-kinds", type=_kinds, default=["deep", "wide"], help="OpenLineage bodies, in turn: deep, wide")
    add("--ol-depth", type=_ranged(int, 1, 400), default=200, help="levels of the deep schema facet")
    add("--ol-width", type=_ranged(int, 0, 1000), default=4, help="plain columns per level of the deep facet")
    add("--ol-name-bytes", type=_ranged(int, 1, 65536), default=256, help="length of each name in the deep facet")
    add("--ol-wide-columns", type=_ranged(int, 1, 100_000), default=1000, help="columns of the wide facet")
    add("--dlq-conns", type=_ranged(int, 0, 64), default=2, help="noisy dead-letter listing connections")
    add("--dlq-ignore-retry-after", action="store_true", help="list again at once after a 429")
    add("--tag-interval", type=_ranged(float, 0.01, 60), default=0.1, help="seconds between noisy tag requests")
    add("--noisy-admins", type=_ranged(int, 1, 20), default=3, help="admin clients of the noisy tenant")
    add("--noisy-assets", type=_ranged(int, 1, 1000), default=20, help="tables the noisy tenant tags")
    add("--dead-letters", type=_ranged(int, 0, 10_000), default=20, help="invalid records for the noisy tenant")
    add("--trickle-interval", type=_ranged(float, 0.1, 60), default=3.0, help="seconds between the receiver's bytes")
    add("--timeout", type=_ranged(float, 10, 3600), default=180.0, help="setup waits at most this long")
    return parser.parse_args(argv)


def loopback_targets(api_host: str, api_port: int, connect_host: str, connect_port: int) -> Targets:
    """The API and the worker as the settings name them; anything but loopback is refused (the bench floods)."""
    urls = []
    for host, port in ((api_host, api_port), (connect_host, connect_port)):
        address = "127.0.0.1" if host in ("", "0.0.0.0", "::") else host  # noqa: S104 - a listen-all setting
        resolved = {ipaddress.ip_address(info[4][0]) for info in socket.getaddrinfo(address, port)}
        if not all(ip.is_loopback for ip in resolved):
            raise SystemExit(f"{host}:{port} is not a loopback address: this bench floods, it targets loopback only")
        urls.append(f"http://[{address}]:{port}" if ":" in address else f"http://{address}:{port}")
    return Targets(api=urls[0], connect=urls[1])


# -- the victim -------------------------------------------------------------------------------------------------------


async def _pace(started: float, interval: float) -> None:
    await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))


async def _timed(
    samples: list[float], failures: Counter[str], label: str, call: Awaitable[httpx.Response]
) -> httpx.Response | None:
    """Await ``call``, appending its latency (also of a failure: a timeout is what the victim waited)."""
    t0 = time.perf_counter()
    try:
        answer = await call
    except httpx.HTTPError as exc:
        failures[f"{label} {type(exc).__name__}"] += 1
        answer = None
    samples.append((time.perf_counter() - t0) * 1000)
    return answer


def _body(answer: httpx.Response) -> dict[str, Any]:
    try:
        doc = answer.json()
    except ValueError:
        return {}
    return doc if isinstance(doc, dict) else {}


def ingest_failure(answer: httpx.Response) -> str | None:
    """Why an ingest answer is a failure for the victim (not 200, or events rejected), or None."""
    if answer.status_code != 200:
        return f"ingest {answer.status_code}"
    return None if _body(answer).get("rejected") == 0 else "ingest rejected"


def sql_failure(answer: httpx.Response) -> str | None:
    """Why a SQL answer is a failure (not 200, not JSON, or cut by an error or a limit while streaming), or None."""
    if answer.status_code != 200:
        return f"sql {answer.status_code}"
    reason = _body(answer).get("reason", "unreadable")
    return None if reason is None else f"sql {reason}"


async def victim_ingest(
    http: httpx.AsyncClient, creds: Credentials, args: argparse.Namespace, stop: float, phase: Phase
) -> None:
    headers = {"authorization": f"Bearer {creds.victim_key}"}
    seq = 0
    while time.monotonic() < stop:
        started = time.monotonic()
        body = ingest_batch(creds.victim, args.events, seq)
        seq += args.events
        answer = await _timed(
            phase.ingest_ms, phase.failures, "ingest", http.post("/v1/events", json=body, headers=headers)
        )
        failed = ingest_failure(answer) if answer is not None else None
        if failed:
            phase.failures[failed] += 1
        await _pace(started, args.ingest_interval)


async def victim_sql(
    http: httpx.AsyncClient, token: str, tenant: str, args: argparse.Namespace, stop: float, phase: Phase
) -> None:
    headers = {"authorization": f"Bearer {token}"}
    body = {"sql": args.sql, "format": "json"}
    while time.monotonic() < stop:
        started = time.monotonic()
        call = http.post(f"/v1/tenants/{tenant}/sql", json=body, headers=headers)
        answer = await _timed(phase.sql_ms, phase.failures, "sql", call)
        failed = sql_failure(answer) if answer is not None else None
        if failed:
            phase.failures[failed] += 1
        await _pace(started, args.sql_interval)


async def token(http: httpx.AsyncClient, client: tuple[str, str]) -> str:
    answer = await http.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=client)
    if answer.status_code != 200:
        raise SystemExit(f"no token for {client[0]}: {answer.status_code} {answer.text[:200]}")
    value: str = answer.json()["access_token"]
    return value


# -- the noisy tenant -------------------------------------------------------------------------------------------------


async def flood_lineage(
    http: httpx.AsyncClient, key: str, label: str, bodies: list[bytes], stop: float, phase: Phase
) -> None:
    headers = {"authorization": f"Bearer {key}", "content-type": "application/json"}
    i = 0
    while time.monotonic() < stop:
        body = bodies[i % len(bodies)]
        i += 1
        try:
            answer = await http.post("/api/v1/lineage", content=body, headers=headers)
            phase.flood[f"lineage-{label} {answer.status_code}"] += 1
        except httpx.HTTPError as exc:
            phase.flood[f"lineage-{label} {type(exc).__name__}"] += 1
            await asyncio.sleep(0.05)


def retry_after(answer: httpx.Response, cap: float = 1.0) -> float:
    try:
        return min(cap, max(0.0, float(answer.headers.get("retry-after", "1"))))
    except ValueError:
        return cap


async def flood_dead_letters(
    http: httpx.AsyncClient, bearer: str, tenant: str, honour: bool, stop: float, phase: Phase
) -> None:
    headers = {"authorization": f"Bearer {bearer}"}
    while time.monotonic() < stop:
        try:
            answer = await http.get(f"/v1/tenants/{tenant}/dead-letters", params={"limit": 500}, headers=headers)
        except httpx.HTTPError as exc:
            phase.flood[f"dead-letters {type(exc).__name__}"] += 1
            await asyncio.sleep(0.05)
            continue
        phase.flood[f"dead-letters {answer.status_code}"] += 1
        if answer.status_code in (429, 503) and honour:
            await asyncio.sleep(retry_after(answer))


async def flood_tags(
    http: httpx.AsyncClient, bearer: str, creds: Credentials, interval: float, stop: float, phase: Phase
) -> None:
    """A new tag on one of the noisy tenant's tables each time: each one a change its webhook must deliver."""
    headers = {"authorization": f"Bearer {bearer}"}
    prefix = f"flood.{int(time.time())}"
    n = 0
    while time.monotonic() < stop:
        started = time.monotonic()
        body = {"urn": creds.noisy_assets[n % len(creds.noisy_assets)], "tag": f"{prefix}.{n}"}
        n += 1
        try:
            answer = await http.post(f"/v1/tenants/{creds.noisy}/assets/tags", json=body, headers=headers)
            phase.flood[f"tags {answer.status_code}"] += 1
        except httpx.HTTPError as exc:
            phase.flood[f"tags {type(exc).__name__}"] += 1
        await _pace(started, interval)


def lineage_bodies(args: argparse.Namespace) -> dict[str, list[bytes]]:
    """A few bodies of each kind, made before the phase (the load generator shares the cores with the platform)."""
    shapes = {"deep": (args.ol_depth, args.ol_width, args.ol_name_bytes), "wide": (1, args.ol_wide_columns, 16)}
    return {kind: [lineage_event(i, *shapes[kind]) for i in range(4)] for kind in args.ol_kinds}


# -- phases -----------------------------------------------------------------------------------------------------------


async def _prepare_flood(
    stack: AsyncExitStack, targets: Targets, creds: Credentials, args: argparse.Namespace
) -> Callable[[float, Phase], list[Task]]:
    """The noisy tenant's clients (from 127.0.0.2), tokens and bodies; the tasks are made once the clock starts."""
    clients = []
    for base in (targets.connect, targets.api):
        transport = httpx.AsyncHTTPTransport(local_address=NOISY_ADDRESS)
        clients.append(
            await stack.enter_async_context(httpx.AsyncClient(base_url=base, timeout=30, transport=transport))
        )
    worker, api = clients
    bearers = [await token(api, client) for client in creds.noisy_admins]
    bodies = lineage_bodies(args)
    listers = bearers[1:] or bearers
    honour = not args.dlq_ignore_retry_after

    def tasks(stop: float, phase: Phase) -> list[Task]:
        made: list[Task] = [flood_tags(api, bearers[0], creds, args.tag_interval, stop, phase)]
        for i in range(args.ol_conns):
            kind = args.ol_kinds[i % len(args.ol_kinds)]
            made.append(flood_lineage(worker, creds.noisy_key, kind, bodies[kind], stop, phase))
        for i in range(args.dlq_conns):
            made.append(flood_dead_letters(api, listers[i % len(listers)], creds.noisy, honour, stop, phase))
        return made

    return tasks


async def run_phase(targets: Targets, creds: Credentials, args: argparse.Namespace, flood: bool) -> Phase:
    phase = Phase()
    async with AsyncExitStack() as stack:
        worker = await stack.enter_async_context(httpx.AsyncClient(base_url=targets.connect, timeout=30))
        api = await stack.enter_async_context(httpx.AsyncClient(base_url=targets.api, timeout=60))
        reader = await token(api, creds.victim_reader)
        flooding = await _prepare_flood(stack, targets, creds, args) if flood else None
        stop = time.monotonic() + args.seconds
        before = cpu_times()
        await asyncio.gather(
            victim_ingest(worker, creds, args, stop, phase),
            victim_sql(api, reader, creds.victim, args, stop, phase),
            *(flooding(stop, phase) if flooding else []),
        )
    phase.cpu_busy = busy_percent(before, cpu_times())
    phase.load1 = os.getloadavg()[0]
    return phase


def run_rounds(
    targets: Targets, creds: Credentials, args: argparse.Namespace, receiver: TrickleReceiver
) -> dict[str, list[Phase]]:
    results: dict[str, list[Phase]] = {"quiet": [], "flood": []}
    for rnd in range(1, args.rounds + 1):
        for label, phases in results.items():
            time.sleep(args.settle)
            phase = asyncio.run(run_phase(targets, creds, args, flood=label == "flood"))
            phases.append(phase)
            webhook = f"{webhook_line(receiver.stats())} (so far)" if phase.flood else ""
            print(phase_line(f"round {rnd} {label}", phase, webhook), flush=True)
    return results


def credentials(settings: Settings, targets: Targets, args: argparse.Namespace) -> Credentials:
    state = load_state(settings) if args.reuse else None
    if state is not None and reader_works(targets.api, state.victim_reader):
        print(f"# reusing tenants {state.victim} and {state.noisy} ({state_path(settings)})", flush=True)
        return state
    if args.reuse:
        print(f"# --reuse: nothing usable in {state_path(settings)}; creating two tenants", flush=True)
    with admin_session(settings) as api:
        creds = provision(api, targets.connect, args.noisy_admins, args.noisy_assets, args.timeout)
    save_state(settings, creds)
    return creds


def report(results: dict[str, list[Phase]], webhook: TrickleStats, argv: list[str], started: datetime) -> None:
    quiet, flood = summarize(results["quiet"]), summarize(results["flood"])
    print(f"\n{verdict(quiet, flood)}\n")
    print(HEADER)
    for row in markdown_rows(quiet, flood, f"{webhook_line(webhook)} (whole run)"):
        print(row)
    print(f"\nCommand: `{command_line(argv)}`")
    print(f"Date: {started:%Y-%m-%d %H:%M} UTC. Machine: {platform.node()}, {os.cpu_count()} CPUs.")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    use_checkout_stack()
    settings = load_settings(Settings)
    targets = loopback_targets(settings.api.host, settings.api.port, settings.connect.host, settings.connect.port)
    started = datetime.now(UTC)
    creds = credentials(settings, targets, args)
    if args.dead_letters:
        seed_dead_letters(settings, creds.noisy, args.dead_letters)
    print(f"# {started:%Y-%m-%d %H:%M} UTC, victim {creds.victim}, noisy {creds.noisy} (from {NOISY_ADDRESS})")
    with TrickleReceiver(args.trickle_interval) as receiver:
        with admin_session(settings) as api:
            point_subscription(api, creds.noisy, receiver.url, creds.webhook_secret)
        try:
            # Not counted: connections, caches, and the outbound runtime's subscription cache (10 s) sees the receiver.
            asyncio.run(run_phase(targets, creds, argparse.Namespace(**{**vars(args), "seconds": 10.0}), flood=False))
            results = run_rounds(targets, creds, args, receiver)
        finally:
            with admin_session(settings) as api:
                disable_subscription(api, creds.noisy)
        webhook = receiver.stats()
    report(results, webhook, argv, started)


if __name__ == "__main__":
    main()
