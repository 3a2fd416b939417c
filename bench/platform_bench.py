"""Whole-platform freshness per table kind (issue 25, item 1): with the stack as `make demo` starts it, a steady mixed
load over pooled tenants, and each sampled event timed from Kafka's acknowledgement to visible in MongoDB and through
Trino SQL, per table kind.

What it measures. The soak's tenants and load (bench/soak: pooled tenants made through the admin API, each with a
write key, a Monte Carlo connector and a webhook subscription; --rate events/s through the ingest API: new tables with
PII-named columns and a column lineage edge, new versions of assets, tags; a Monte Carlo incident every 2 s), plus a
person's edit of an asset's description through the admin API every 4 s. The clock of an event starts at the 2xx of
the ingest API, of the webhook or of the edit (each means: durable in Kafka) and stops when the event shows in
  - MongoDB: the tenant's projection the API reads (assets, classifications, propagated_tags, lineage, incidents,
    the asset's health, asset_edits), and
  - Trino: the tenant's views, as a BI user queries them (the same kinds; lineage_edges).
Table kinds: assets (upserts), classifications (a person's tag, and the job's own PII tag of a new column),
propagated_tags (PII carried along the new edge), lineage, incidents, health (the incident on its table's row),
edits. Sampled: one asset upsert in --sample-every, every event of the other kinds.

Against which floor. The goals of issue 25 (whole platform, 200 events/s over 50 tenants, 2 cores): MongoDB p50 <= 1 s
and p99 <= 2.5 s, Trino p50 <= 5 s and p99 <= 10 s, for every kind. The job alone is bench/stream_bench.py.

Light probing: every probe polled on a backoff of its own (MongoDB from 0.1 s up to every 0.5 s, one find by key;
Trino from 1 s up to every 2 s), and Trino asked ONE query per round (at most one a second) for every due probe
(split in queries of at most 40 joins: Trino refuses a query of over 150 stages).
Times are taken when the answer came back: upper bounds, by at most one poll interval (or one Trino round: reported).
An event not visible within --timeout is counted `not_visible`, never dropped.

Needs the whole platform: `python -m ops stack up --with-processors` (or `make demo`). Takes --duration, plus the new
tenants' provisioning (about 5 s each, four at a time), plus the drain (up to --timeout). Prints a table and writes
<out>.json and <out>.md:

    .stack/venv/bin/python bench/platform_bench.py --tenants 5 --rate 20 --duration 120
    .stack/venv/bin/python bench/platform_bench.py                      # 50 tenants, 200 events/s, 5 minutes
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import shlex
import signal
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's code, not whichever metalake the interpreter has installed

# bench/ is on sys.path when this runs as a script.
from freshness import report  # noqa: E402
from freshness.load import ProbedLoad, Sampler  # noqa: E402
from freshness.stores import mongo_look, trino_look  # noqa: E402
from freshness.watch import TRINO_ROUND_MAX, TRINO_ROUND_S, Poller  # noqa: E402
from pymongo import MongoClient  # noqa: E402
from soak import tenants  # noqa: E402
from soak.analysis import load_average  # noqa: E402
from soak.receiver import Receiver  # noqa: E402
from soak.rss import Sampler as Machine  # noqa: E402
from soak.run import check_stack, say  # noqa: E402
from tenant_isolation_setup import admin_session  # noqa: E402

from metalake.settings import load_settings  # noqa: E402
from metalake.trino_connect import connect as trino_connect  # noqa: E402
from ops.settings import Settings  # noqa: E402
from ops.stack.manager import StackManager  # noqa: E402
from ops.stack.paths import use_checkout_stack  # noqa: E402


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--tenants", type=int, default=50, help="pooled tenants the load is spread over (default 50)")
    add("--rate", type=float, default=200.0, help="events per second through the ingest API (default 200)")
    add("--duration", type=float, default=300.0, help="seconds of load (default 300)")
    add("--sample-every", type=int, default=20, help="time one asset upsert in this many (default 20)")
    add("--timeout", type=float, default=120.0, help="seconds after which a sample counts not visible (default 120)")
    add("--seed", type=int, default=20261130, help="the load's random seed")
    add("--out", type=Path, default=ROOT / "platform_bench", help="<out>.json and <out>.md (default ./platform_bench)")
    return parser.parse_args(argv)


def fleet_of(settings: Settings, args: argparse.Namespace, receiver: Receiver) -> tenants.Fleet:
    """New tenants each run (not the last run's: a table made again would find its propagated and PII tags of the
    last run already there), their webhook subscriptions to this run's receiver, so outbound has its work too."""
    say(f"creating {args.tenants} tenants (write key, Monte Carlo connector, webhook subscription each)")
    with admin_session(settings) as api:
        return tenants.provision(api, args.tenants, receiver.url)


def pollers(settings: Settings, timeout: float) -> tuple[Poller, Poller]:
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri)
    cursor = trino_connect(settings, user="bench").cursor()
    return (
        Poller("mongodb", mongo_look(mongo, settings), timeout, batch=1_000),
        Poller("trino", trino_look(cursor, settings), timeout, batch=TRINO_ROUND_MAX, min_round_s=TRINO_ROUND_S),
    )


def drive(load: ProbedLoad, duration: float) -> None:
    async def run() -> None:
        task = asyncio.get_running_loop().create_task(load.run())
        await asyncio.sleep(duration)
        load.stop.set()
        await task

    asyncio.run(run())


def measure(args: argparse.Namespace, settings: Settings, fleet: tenants.Fleet, machine: Machine) -> dict[str, Any]:
    """The load for --duration with the pollers beside it, then the drain (until every sample is seen or timed out)."""
    stores = pollers(settings, args.timeout)
    sampler = Sampler({"assets": args.sample_every}, [s.add for s in stores])
    load = ProbedLoad(settings, fleet, args.rate, args.seed, sampler)
    stop = threading.Event()
    threads = [threading.Thread(target=s.run, args=(stop,), daemon=True) for s in stores]
    for thread in threads:
        thread.start()
    say(f"load: {args.rate:g} events/s over {len(fleet.tenants)} tenants for {args.duration:g} s")
    t0 = time.time()
    drive(load, args.duration)
    say(f"load stopped; draining ({sum(not s.idle() for s in stores)} stores with samples pending)")
    deadline = time.monotonic() + args.timeout + 10
    while not all(s.idle() for s in stores) and time.monotonic() < deadline:
        time.sleep(1)
    stop.set()
    for thread in threads:
        thread.join()
    tally = load.tally
    return {
        "date": datetime.fromtimestamp(t0, UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/platform_bench.py " + shlex.join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}; the whole platform on it",
        "load_average": load_average(machine.samples),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "load": {
            "accepted": tally.accepted,
            "accepted_per_s": round(tally.accepted / args.duration, 1),
            "rejected": tally.rejected,
            "skipped": tally.skipped,
            "resends": tally.resends,
            "incidents": sum(len(v) for v in tally.incidents.values()),
            "edits": dict(load.edits),
        },
        "sampled": dict(sampler.seen),
        "probing": {s.store: s.figures() for s in stores},
        "freshness": report.summarize(sampler.kept),
    }


def interrupt(signum: int, frame: object) -> None:
    """SIGTERM, and SIGINT (which a background job ignores otherwise), end the run through ``main``'s ``finally``:
    the subscriptions are disabled (outbound would retry against the closed receiver for ever)."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def main() -> None:
    args = parse_args()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, interrupt)
    root = use_checkout_stack()
    settings = load_settings(Settings)
    stack = StackManager(settings, root, echo=lambda line: say(f"stack: {line}"))
    check_stack(stack)
    receiver = Receiver(0, "")
    receiver.up()  # before the subscriptions point at it
    machine = Machine(stack)  # the load average (the machine is shared), every 10 s
    try:
        fleet = fleet_of(settings, args, receiver)
        receiver.secret = fleet.webhook_secret
        machine.start()
        try:
            summary = measure(args, settings, fleet, machine)
        finally:
            with admin_session(settings) as api:
                tenants.disable(api, fleet)  # outbound must not retry against the closed receiver for ever
    finally:
        machine.stop.set()
        receiver.down()
    text = report.table(summary["freshness"])
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2) + "\n")
    args.out.with_suffix(".md").write_text(text)
    print(json.dumps({k: v for k, v in summary.items() if k != "freshness"}, indent=2))
    print(text)


if __name__ == "__main__":
    main()
