"""The pure parts of ``bench/tenant_isolation.py``: one phase's samples, the medians over rounds, the flood/quiet
ratios, the machine's CPU share, and the markdown rows for docs/benchmarks.md."""

from __future__ import annotations

import math
import shlex
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from trickle_receiver import TrickleStats

GOAL = 2.0


@dataclass
class Phase:
    ingest_ms: list[float] = field(default_factory=list)
    sql_ms: list[float] = field(default_factory=list)
    failures: Counter[str] = field(default_factory=Counter)
    flood: Counter[str] = field(default_factory=Counter)
    load1: float = math.nan
    cpu_busy: float = math.nan  # percent of all CPUs over the phase


@dataclass(frozen=True)
class Summary:
    ingest_p50: float
    ingest_p99: float
    ingests: float
    sql_p50: float
    sql_p99: float
    queries: float
    failures: float
    flood: dict[str, float]
    load1: float
    cpu_busy: float


# -- statistics -------------------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    """Nearest rank; NaN for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def ratio(flood: float, quiet: float) -> float:
    return flood / quiet if quiet > 0 and not math.isnan(quiet) and not math.isnan(flood) else math.nan


def _median(values: list[float]) -> float:
    known = [v for v in values if not math.isnan(v)]
    return statistics.median(known) if known else math.nan


def summarize(phases: list[Phase]) -> Summary:
    flood: Counter[str] = Counter()
    for phase in phases:
        flood.update(phase.flood)
    return Summary(
        ingest_p50=_median([percentile(p.ingest_ms, 0.5) for p in phases]),
        ingest_p99=_median([percentile(p.ingest_ms, 0.99) for p in phases]),
        ingests=_median([len(p.ingest_ms) for p in phases]),
        sql_p50=_median([percentile(p.sql_ms, 0.5) for p in phases]),
        sql_p99=_median([percentile(p.sql_ms, 0.99) for p in phases]),
        queries=_median([len(p.sql_ms) for p in phases]),
        failures=_median([sum(p.failures.values()) for p in phases]),
        flood={k: v / len(phases) for k, v in sorted(flood.items())},
        load1=_median([p.load1 for p in phases]),
        cpu_busy=_median([p.cpu_busy for p in phases]),
    )


def cpu_times(stat: str | None = None) -> tuple[int, int]:
    """(busy, total) jiffies of all CPUs from /proc/stat's first line; busy leaves out idle and iowait."""
    line = (stat if stat is not None else Path("/proc/stat").read_text()).splitlines()[0]
    values = [int(v) for v in line.split()[1:9]]
    return sum(values) - values[3] - values[4], sum(values)


def busy_percent(before: tuple[int, int], after: tuple[int, int]) -> float:
    total = after[1] - before[1]
    return 100.0 * (after[0] - before[0]) / total if total > 0 else math.nan


# -- report -----------------------------------------------------------------------------------------------------------

HEADER = (
    "| phase | victim ingest p50 / p99 (ms) | ingests | victim SQL p50 / p99 (ms) | queries | victim failures | "
    "p99 flood/quiet (ingest, SQL) | what the flood got (per round) | load 1 min / CPU busy |\n"
    "|---|---|---|---|---|---|---|---|---|"
)


def _answers(flood: dict[str, float]) -> str:
    return ", ".join(f"{k}: {v:.0f}" for k, v in flood.items()) or "-"


def markdown_rows(quiet: Summary, flood: Summary, webhook: str) -> list[str]:
    ratios = f"{ratio(flood.ingest_p99, quiet.ingest_p99):.2f}x, {ratio(flood.sql_p99, quiet.sql_p99):.2f}x"
    rows = []
    for label, s, extra in (("quiet", quiet, ""), ("flood", flood, ratios)):
        got = "" if label == "quiet" else f"{_answers(s.flood)}; {webhook}"
        rows.append(
            f"| {label} | {s.ingest_p50:.1f} / {s.ingest_p99:.1f} | {s.ingests:.0f} | {s.sql_p50:.1f} / "
            f"{s.sql_p99:.1f} | {s.queries:.0f} | {s.failures:.0f} | {extra} | {got} | {s.load1:.2f} / "
            f"{s.cpu_busy:.0f} % |"
        )
    return rows


def verdict(quiet: Summary, flood: Summary, goal: float = GOAL) -> str:
    ingest, sql = ratio(flood.ingest_p99, quiet.ingest_p99), ratio(flood.sql_p99, quiet.sql_p99)
    held = all(r <= goal for r in (ingest, sql))  # NaN compares false: no figure is no pass
    return (
        f"victim p99 under flood / quiet: ingest {ingest:.2f}x, SQL {sql:.2f}x: "
        f"{'within' if held else 'NOT within'} {goal:g}x"
    )


def webhook_line(stats: TrickleStats) -> str:
    ended = ", ".join(f"{k} {v}" for k, v in sorted(stats.ended.items())) or "none ended"
    return (
        f"webhook: {stats.connections} deliveries taken ({ended}; {stats.open} still held), longest held "
        f"{stats.longest_held_s:.0f} s, {stats.refused} refused"
    )


def phase_line(title: str, phase: Phase, webhook: str = "") -> str:
    """One phase as the bench prints it while it runs."""
    line = (
        f"{title}: ingest p50 {percentile(phase.ingest_ms, 0.5):.1f} ms p99 {percentile(phase.ingest_ms, 0.99):.1f} ms "
        f"({len(phase.ingest_ms)}), SQL p50 {percentile(phase.sql_ms, 0.5):.1f} ms p99 "
        f"{percentile(phase.sql_ms, 0.99):.1f} ms ({len(phase.sql_ms)}), victim failures {dict(phase.failures)}, "
        f"load {phase.load1:.2f}, CPU {phase.cpu_busy:.0f} %"
    )
    if phase.flood:
        line += f"; flood {dict(sorted(phase.flood.items()))}"
    return f"{line}; {webhook}" if webhook else line


def command_line(argv: list[str]) -> str:
    return shlex.join([".stack/venv/bin/python", "bench/tenant_isolation.py", *argv])
