"""Soak: the whole local platform under a steady mixed load for an hour, with a fault every few minutes.

Runs against the stack as `make demo` leaves it (`metalake stack up --with-processors`: Kafka, FerretDB, Trino,
Prometheus, the stream job, the API, the connector worker and every processor). It:

  1. creates --tenants pooled tenants through the admin API (or reuses the last run's: --reuse), each with a write
     key, a Monte Carlo connector and a signed-webhook subscription to a receiver of the bench's own on loopback
     (it verifies each delivery's signature and counts them per change id); the first tenant also gets a PostgreSQL
     crawler on a schedule (every 300 s) over a database of the stack's PostgreSQL that grows a table a minute;
  2. sends --rate events/s through the public intake for --duration: ingest API batches (new tables whose columns
     are named like personal data, so the job tags them PII and propagation carries the tag along column lineage;
     new versions of existing assets; tags) and a Monte Carlo incident webhook every 2 s;
  3. injects a fault every --fault-every, in turn: kill -9 of the stream job, of propagation, of outbound (the
     local stack has no supervisor: the bench restarts them, as systemd or Kubernetes would, and says so); Kafka
     restarted; FerretDB restarted; the webhook receiver down for two minutes;
  4. drains, then checks per event id: every accepted event once in Delta's history, every asset's newest version
     in Delta and MongoDB, every incident in Delta, every change the subscriptions take delivered once; the time
     freshness p99 took to be under 30 s again after each fault (the worse store's, and each store's own); each
     process's resident memory (every 10 s);
  5. writes the curves (Prometheus query_range) to --figure and the summary to --out (JSON and markdown).

When the drain timed out (the lake query still behind), `--recheck` later compares Delta's history with what Kafka
holds of the run, per event id, waiting up to --drain-timeout for the lake query to catch up.

A progress line every 30 s. Not part of `make test`: `make soak` (one hour, 200 events/s), or a short check:

    source /work/stack-s/env.sh   # a private stack's ports, if any
    .stack/venv/bin/python bench/soak.py --duration 5m --rate 50 --fault-every 1m --tenants 10
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import signal
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # the checkout's code, not whichever metalake the interpreter has installed

# bench/ is on sys.path when this runs as a script.
from soak import analysis, crawl, end, plot, prom, report, tenants, verify  # noqa: E402
from soak import recheck as soak_recheck  # noqa: E402
from soak.faults import KINDS, Faults  # noqa: E402
from soak.load import Load  # noqa: E402
from soak.receiver import Receiver  # noqa: E402
from soak.rss import Sampler  # noqa: E402
from soak.run import Run, check_stack, say, soak  # noqa: E402
from soak.supervisor import Supervisor  # noqa: E402
from tenant_isolation_setup import admin_session  # noqa: E402

from metalake.settings import load_settings  # noqa: E402
from metalake.trino_connect import connect as trino_connect  # noqa: E402
from ops.settings import Settings  # noqa: E402
from ops.stack.manager import StackManager  # noqa: E402
from ops.stack.paths import use_checkout_stack  # noqa: E402


def duration(text: str) -> float:
    """``90``, ``90s``, ``5m`` or ``1h`` -> seconds."""
    scale = {"s": 1, "m": 60, "h": 3600}.get(text[-1:], 1)
    value = float(text[:-1] if text[-1:] in "smh" else text) * scale
    if value < 0:
        raise argparse.ArgumentTypeError("must not be negative")
    return value


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--duration", type=duration, default=3600.0, help="how long the load runs (90s, 5m, 1h; default 1h)")
    add("--rate", type=float, default=200.0, help="events per second through the intake (default 200)")
    add("--tenants", type=int, default=50, help="pooled tenants the load is spread over (default 50)")
    add("--fault-every", type=duration, default=300.0, help="time between faults (default 5m; 0: none)")
    add("--faults", default=",".join(KINDS), help=f"the faults, in turn (default all: {','.join(KINDS)})")
    add("--drain-timeout", type=duration, default=900.0, help="longest wait for the platform to catch up (15m)")
    add("--receiver-port", type=int, default=0, help="the webhook receiver's loopback port (default: a free one)")
    add("--reuse", action="store_true", help="the tenants of the last run (kept in the stack's folder)")
    add("--recheck", action="store_true", help="no load: Delta's history against Kafka for the last run (<out>.json)")
    add("--seed", type=int, default=20261129, help="the load's random seed")
    add("--out", type=Path, default=ROOT / "docs" / "soak", help="summary files: <out>.json and <out>.md")
    add("--figure", type=Path, default=ROOT / "docs" / "img" / "soak.png", help="the figure")
    args = parser.parse_args(argv)
    args.faults = [k.strip() for k in args.faults.split(",") if k.strip()]
    unknown = set(args.faults) - set(KINDS)
    if unknown:
        parser.error(f"unknown faults {sorted(unknown)}; known: {', '.join(KINDS)}")
    return args


def fleet_of(settings: Settings, args: argparse.Namespace, receiver: Receiver) -> tenants.Fleet:
    with admin_session(settings) as api:
        fleet = tenants.Fleet.load(settings) if args.reuse else None
        if fleet is None or len(fleet.tenants) < args.tenants:
            say(f"creating {args.tenants} tenants (write key, Monte Carlo connector, webhook subscription each)")
            fleet = tenants.provision(api, args.tenants, receiver.url)
            fleet.save(settings)
        fleet = tenants.Fleet(fleet.tenants[: args.tenants], fleet.webhook_secret)
        tenants.repoint(api, fleet, receiver.url)
        crawl.ensure_database(settings)
        crawl.configure(api, settings, fleet.tenants[0].id)
    return fleet


def prepare(args: argparse.Namespace) -> Run:
    root = use_checkout_stack()
    settings = load_settings(Settings)
    stack = StackManager(settings, root, echo=lambda line: say(f"stack: {line}"))
    check_stack(stack)
    receiver = Receiver(args.receiver_port, "")
    receiver.up()  # before the subscriptions point at it; a free port is kept for the whole run
    fleet = fleet_of(settings, args, receiver)
    receiver.secret = fleet.webhook_secret
    connect = f"http://{settings.connect.host}:{settings.connect.port}"
    load = Load(connect, fleet, args.rate, args.seed)
    faults = Faults(stack, receiver, args.faults, say)
    return Run(args, settings, stack, fleet, receiver, load, faults, Sampler(stack), Supervisor(stack, faults, say))


def summarize(run: Run, checks: dict[str, object]) -> dict[str, object]:
    curves = prom.curves(run.prometheus, run.t0 - 60, time.time())
    plot.draw(run.args.figure, curves, run.sampler.samples, run.faults.done, run.t0)
    tally = run.load.tally
    return {
        "date": datetime.fromtimestamp(run.t0, UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "command": "python bench/soak.py " + shlex.join(sys.argv[1:]),
        "machine": f"{os.cpu_count()} cores, {platform.machine()}; the whole platform on it; load average "
        + "/".join(f"{x:.1f}" for x in os.getloadavg()),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(run.args).items()},
        "t0": run.t0,
        "load": {
            "accepted": tally.accepted,
            "rejected": tally.rejected,
            "unsent": tally.unsent,
            "skipped": tally.skipped,
            "resends": tally.resends,
            "statuses": dict(tally.statuses),
            "refusals": tally.refusals,
            "reject_reasons": dict(tally.reject_reasons),
            "ambiguous_ids": len(tally.ambiguous),
            "incidents": sum(len(v) for v in tally.incidents.values()),
            "accepted_per_s": tally.accepted / max(run.end - run.t0, 1e-9),
        },
        "load_average": analysis.load_average(run.sampler.samples),
        "checks": checks,
        "faults": analysis.recoveries(run.faults.done, time.time(), curves["freshness_p99"]),
        "memory": analysis.memory(run.sampler.samples),
        "unplanned_exits": [vars(e) for e in run.supervisor.exits],
        "figure": str(run.args.figure),
    }


def stop_on_signal(signum: int, frame: object) -> None:
    """SIGTERM (and SIGINT, which a background job ignores otherwise) end the run through ``main``'s ``finally``:
    the subscriptions are disabled and the receiver closed."""
    raise KeyboardInterrupt(signal.Signals(signum).name)


def recheck(args: argparse.Namespace) -> None:
    """Wait (up to --drain-timeout) until Delta holds every event of the last run that Kafka holds, then compare."""
    use_checkout_stack()
    settings = load_settings(Settings)
    fleet, last = tenants.Fleet.load(settings), json.loads(args.out.with_suffix(".json").read_text())
    assert fleet is not None, "no tenants of a last run in the stack's folder"
    ids = [t.id for t in fleet.tenants[: int(last["args"]["tenants"])]]
    in_kafka = soak_recheck.kafka_ids(settings, ids, int(last["t0"] * 1000))
    say(f"{len(in_kafka)} event ids in Kafka ({last['load']['accepted']} accepted by the run)")
    cursor = trino_connect(settings, user="bench").cursor()
    checkpoint, deadline = (
        settings.checkpoint_root / "_pooled" / "metalake-pooled-lake",
        time.monotonic() + args.drain_timeout,
    )
    while True:
        # The committed offsets before Delta: what they cover was in Delta before it was read.
        done, in_delta = soak_recheck.committed(checkpoint), verify.delta_history(cursor, ids)
        if in_delta.keys() >= in_kafka.keys() or time.monotonic() > deadline:
            break
        say(f"recheck: {len(in_delta.keys() & in_kafka.keys())}/{len(in_kafka)} in Delta")
        time.sleep(30)
    result = {"at": datetime.now(UTC).isoformat(), **soak_recheck.compare(in_kafka, in_delta, done)}
    args.out.with_suffix(".recheck.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))


def main() -> None:
    args = parse_args()
    if args.recheck:
        recheck(args)
        return
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, stop_on_signal)
    # The bench's own restarts wait longer than a plain `stack up` (180 s): a cold Spark start on a loaded 2-core
    # machine took more (the first short runs), and a supervisor would not give up on it either.
    os.environ.setdefault("METALAKE_STACK__START_TIMEOUT_S", "600")
    run = prepare(args)
    try:
        soak(run)
        checks = end.checks(run)
        summary = summarize(run, checks)
    finally:
        run.sampler.stop.set()
        with admin_session(run.settings) as api:
            tenants.disable(api, run.fleet)
        run.receiver.down()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.with_suffix(".json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    args.out.with_suffix(".md").write_text(report.markdown(summary))
    print(report.markdown(summary))


if __name__ == "__main__":
    main()
