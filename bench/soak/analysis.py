"""Figures from the soak's samples: how long freshness took to come back under its objective after each fault, and
each process's memory (start, end, max, slope)."""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

from soak.faults import Fault
from soak.prom import Series
from soak.rss import Sample

OBJECTIVE_S = 30.0
MIB = 1024 * 1024
MIN_SEGMENT_S = 600.0  # a slope over less than 10 min of one process's life says nothing


def worst(series: Series) -> list[tuple[float, float]]:
    """Per timestamp, the worse of the stores' values."""
    merged: dict[float, float] = {}
    for points in series.values():
        for t, v in points:
            merged[t] = max(v, merged.get(t, v))
    return sorted(merged.items())


def recovery(fault: Fault, until: float, p99: list[tuple[float, float]]) -> dict[str, Any]:
    """Seconds from the fault's start until the 1-minute p99 is under the objective for good (up to ``until``: the
    next fault, or the end of the load); its peak meanwhile."""
    window = [(t, v) for t, v in p99 if fault.at <= t < until]
    peak = max((v for _, v in window), default=None)
    above = [t for t, v in window if v >= OBJECTIVE_S]
    if not above:
        back_s: float | None = 0.0
    else:
        later = [t for t, _ in window if t > above[-1]]
        back_s = later[0] - fault.at if later else None  # None: still above at the next fault
    return {**asdict(fault), "p99_peak_s": peak, "under_objective_after_s": back_s}


def recoveries(faults: list[Fault], end: float, p99: Series) -> list[dict[str, Any]]:
    """Each fault's recovery by the worse store's p99, and each store's own (``by_store``): a store that never met
    the objective hides the other's recovery in the worse one."""
    bounds = [f.at for f in faults[1:]] + [end]
    out = []
    for fault, until in zip(faults, bounds, strict=True):
        row = recovery(fault, until, worst(p99))
        row["by_store"] = {
            store: recovery(fault, until, sorted(points))["under_objective_after_s"]
            for store, points in sorted(p99.items())
        }
        out.append(row)
    return out


def slope_per_h(points: list[tuple[float, float]]) -> float | None:
    """Least-squares slope of (unix time, MiB) in MiB per hour."""
    if len(points) < 3 or points[-1][0] - points[0][0] < MIN_SEGMENT_S:
        return None
    n = len(points)
    mt = sum(t for t, _ in points) / n
    mv = sum(v for _, v in points) / n
    var = sum((t - mt) ** 2 for t, _ in points)
    return sum((t - mt) * (v - mv) for t, v in points) / var * 3600 if var else None


def memory(samples: list[Sample]) -> dict[str, dict[str, Any]]:
    """Per service: MiB at the first and last sample, the max, restarts, and the slope of its last process's life."""
    out: dict[str, dict[str, Any]] = {}
    for name in sorted({n for s in samples for n in s.rss}):
        seen = [(s.at, s.rss[name] / MIB, s.pids[name]) for s in samples if name in s.rss]
        last_pid = seen[-1][2]
        segment = [(t, v) for t, v, pid in seen if pid == last_pid]
        out[name] = {
            "start_mib": round(seen[0][1], 1),
            "end_mib": round(seen[-1][1], 1),
            "max_mib": round(max(v for _, v, _ in seen), 1),
            "restarts": len({pid for _, _, pid in seen}) - 1,
            "slope_mib_per_h": _round(slope_per_h(segment)),
            "slope_over_min": round((segment[-1][0] - segment[0][0]) / 60, 1),
        }
    return out


def _round(v: float | None) -> float | None:
    return None if v is None else round(v, 1)


def load_average(samples: list[Sample]) -> dict[str, float]:
    values = [s.load1 for s in samples] or [0.0]
    return {"mean": round(sum(values) / len(values), 2), "max": round(max(values), 2)}
