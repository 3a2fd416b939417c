"""The soak run, in order: check the stack, set up the tenants, the receiver and the crawl; then for ``duration`` the
load, a fault every ``fault_every`` and a progress line every ``PROGRESS_S``; then the drain, the checks per event id,
the curves, the figure and the summary."""

from __future__ import annotations

import argparse
import asyncio
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ops.settings import Settings
from ops.stack.manager import StackManager
from soak import crawl, prom, tenants
from soak.faults import Faults
from soak.load import Load
from soak.receiver import Receiver
from soak.rss import Sampler
from soak.supervisor import CHECK_S, Supervisor

PROGRESS_S = 30.0
CRAWL_GROWTH_S = 60.0
PROCESSORS = ("stream", "api", "connect", "propagation", "outbound", "access", "lake-worker", "prometheus")


def say(msg: str) -> None:
    print(f"{datetime.now(UTC):%H:%M:%S} {msg}", flush=True)


@dataclass
class Run:
    args: argparse.Namespace
    settings: Settings
    stack: StackManager
    fleet: tenants.Fleet
    receiver: Receiver
    load: Load
    faults: Faults
    sampler: Sampler
    supervisor: Supervisor
    t0: float = 0.0
    end: float = 0.0
    finished: threading.Event = field(default_factory=threading.Event)

    @property
    def prometheus(self) -> str:
        return f"http://{self.settings.stack.host}:{self.settings.stack.ports.prometheus}"


def check_stack(stack: StackManager) -> None:
    """The stack as ``make demo`` leaves it: every processor running."""
    states = {s.name: s.state for s in stack.status()}
    down = [name for name in PROCESSORS if states.get(name) != "running"]
    if down:
        raise SystemExit(f"not running: {', '.join(down)}; start the stack with `metalake stack up --with-processors`")


def every(interval_s: float, finished: threading.Event, action: Callable[[int], Any], first_s: float) -> None:
    """``action(n)`` at first_s, first_s + interval_s, ... from now (a slow action delays only its own turn) until
    ``finished``; an action that fails is reported and the next one runs."""
    start, n = time.monotonic(), 0
    while not finished.wait(max(0.0, start + first_s + n * interval_s - time.monotonic())):
        try:
            action(n)
        except Exception as exc:  # noqa: BLE001 - one failed fault or progress line must not end the soak
            say(f"{getattr(action, '__name__', 'action')} {n} failed: {type(exc).__name__}: {exc}")
        n += 1


def progress(run: Run, last: list[tuple[float, int]]) -> Callable[[int], None]:
    def line(n: int) -> None:
        now, tally = time.time(), run.load.tally
        rate = (tally.accepted - last[-1][1]) / max(now - last[-1][0], 1e-9)
        last.append((now, tally.accepted))
        p99, lag = prom.p99_now(run.prometheus), prom.lag_now(run.prometheus)
        p99_text = "-" if p99 is None else f"{p99:.1f}s"
        say(
            f"[{(now - run.t0) / 60:5.1f} min] {rate:6.1f} ev/s accepted ({tally.accepted} in all, "
            f"{tally.resends} resends, {tally.skipped} skipped, {run.load.queued} queued), "
            f"{run.receiver.counts.total()} deliveries, "
            f"p99 {p99_text}, lag {lag if lag is None else int(lag)}, faults {len(run.faults.done)}"
            + (f", DOWN: {', '.join(down)}" if (down := prom.down_now(run.prometheus)) else "")
        )

    return line


def background(run: Run) -> list[threading.Thread]:
    """The fault injector, the progress lines and the crawl's growing source, each in a thread of its own."""
    jobs: list[tuple[float, Callable[[int], Any], float]] = [
        (PROGRESS_S, progress(run, [(time.time(), 0)]), PROGRESS_S),
        (CRAWL_GROWTH_S, lambda n: crawl.add_table(run.settings, n), CRAWL_GROWTH_S),
        (CHECK_S, run.supervisor.check, CHECK_S),
    ]
    if run.args.fault_every > 0 and run.faults.kinds:
        jobs.append((run.args.fault_every, run.faults.inject, run.args.fault_every))
    threads = [
        threading.Thread(target=every, args=(interval, run.finished, action, first), daemon=True)
        for interval, action, first in jobs
    ]
    for thread in threads:
        thread.start()
    return threads


async def drive(run: Run) -> None:
    """The load for the duration; the background threads run beside it."""
    task = asyncio.get_running_loop().create_task(run.load.run())
    await asyncio.sleep(run.args.duration)
    run.load.stop.set()
    run.finished.set()  # no fault after the duration: the requests still queued are sent, then the drain
    await task


def soak(run: Run) -> None:
    run.t0 = time.time()
    run.sampler.start()
    threads = background(run)
    say(f"load: {run.args.rate:g} events/s over {len(run.fleet.tenants)} tenants for {run.args.duration / 60:.1f} min")
    asyncio.run(drive(run))
    run.end = time.time()
    say("load stopped; waiting for a fault in progress to end")
    for thread in threads:
        thread.join()
