"""The figures: per table kind and store, how many sampled events became visible (n), their p50, p99 and max seconds
from Kafka's acknowledgement, and how many never did within the timeout (``not_visible``: reported, never dropped).
Pure: the probes in, a dict and a markdown table out."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from freshness.probes import KINDS, STORES, Probe


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank percentile (the smallest value with at least ``q`` of the values at or below it)."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def cell(times: Sequence[float], not_visible: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"n": len(times), "not_visible": not_visible}
    if times:
        figures |= {"p50_s": percentile(times, 0.5), "p99_s": percentile(times, 0.99), "max_s": max(times)}
        figures = {k: round(v, 3) if isinstance(v, float) else v for k, v in figures.items()}
    return figures


def summarize(probes: Iterable[Probe]) -> dict[str, dict[str, dict[str, Any]]]:
    """kind -> store -> figures, for every kind that was sampled at least once, in ``KINDS`` order."""
    by_kind: dict[str, list[Probe]] = {}
    for probe in probes:
        by_kind.setdefault(probe.kind, []).append(probe)
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for kind in sorted(by_kind, key=lambda k: KINDS.index(k) if k in KINDS else len(KINDS)):
        group = by_kind[kind]
        out[kind] = {
            store: cell([p.seen[store] for p in group if store in p.seen], sum(store not in p.seen for p in group))
            for store in STORES
        }
    return out


def _seconds(figures: dict[str, Any], key: str) -> str:
    return f"{figures[key]:.2f}" if key in figures else "-"


def table(summary: dict[str, dict[str, dict[str, Any]]]) -> str:
    """The summary as a markdown table, one row per kind and store."""
    lines = [
        "| table kind | store | n | p50 s | p99 s | max s | not visible |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for kind, stores in summary.items():
        for store, f in stores.items():
            p50, p99, top = (_seconds(f, k) for k in ("p50_s", "p99_s", "max_s"))
            lines.append(f"| {kind} | {store} | {f['n']} | {p50} | {p99} | {top} | {f['not_visible']} |")
    return "\n".join(lines) + "\n"
