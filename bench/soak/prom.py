"""The soak's curves, read from the stack's Prometheus (``query_range``) on the metrics the processes export
(docs/operations.md): freshness p50/p99 per store, consumer lag per process, intake events/s, deliveries/s, and the
RSS the processes report themselves. The windows are one minute: a fault shows within a minute, and leaves within one.
"""

from __future__ import annotations

import json
import math
import urllib.parse
import urllib.request
from typing import Any

Series = dict[str, list[tuple[float, float]]]  # label -> [(unix time, value)]

STEP_S = 10


def _quantile(q: float) -> str:
    return f"histogram_quantile({q}, sum by (le, store) (rate(metalake_freshness_seconds_bucket[1m])))"


#: Curve -> (PromQL, the label that names each line).
CURVES = {
    "freshness_p50": (_quantile(0.5), "store"),
    "freshness_p99": (_quantile(0.99), "store"),
    "lag": ("sum by (job) (metalake_consumer_lag_records)", "job"),
    "intake_per_s": (
        'sum by (source) (rate(metalake_events_total{outcome="accepted",source=~"ingest|webhook|postgres"}[1m]))',
        "source",
    ),
    # What each store took per second: while a backlog waits, the rate the platform sustains on this machine.
    "committed_per_s": ("sum by (store) (rate(metalake_freshness_seconds_count[1m]))", "store"),
    "deliveries_per_s": ("sum by (outcome) (rate(metalake_deliveries_total[1m]))", "outcome"),
    "process_rss": ("max by (job) (process_resident_memory_bytes)", "job"),
}


def _get(url: str, path: str, params: dict[str, Any]) -> list[dict[str, Any]]:
    address = f"{url}{path}?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(address, timeout=60) as resp:  # noqa: S310 - the stack's loopback Prometheus
        body = json.loads(resp.read())
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def query_range(url: str, promql: str, label: str, start: float, end: float) -> Series:
    """Each series' finite samples, under its ``label`` value (``all`` when it has none)."""
    out: Series = {}
    for series in _get(url, "/api/v1/query_range", {"query": promql, "start": start, "end": end, "step": STEP_S}):
        points = [(float(t), float(v)) for t, v in series["values"] if math.isfinite(float(v))]
        out[series["metric"].get(label, "all")] = points
    return out


def instant(url: str, promql: str) -> float | None:
    """The largest value of an instant query (None: no sample, or not a number)."""
    values = [float(s["value"][1]) for s in _get(url, "/api/v1/query", {"query": promql})]
    finite = [v for v in values if math.isfinite(v)]
    return max(finite) if finite else None


def curves(url: str, start: float, end: float) -> dict[str, Series]:
    return {name: query_range(url, promql, label, start, end) for name, (promql, label) in CURVES.items()}


def p99_now(url: str) -> float | None:
    """The worse store's freshness p99 over the last minute (what ``metalake stack top`` shows)."""
    return instant(url, _quantile(0.99))


def lag_now(url: str) -> float | None:
    return instant(url, "sum(metalake_consumer_lag_records)")


def down_now(url: str) -> list[str]:
    """The scrape jobs Prometheus cannot reach now: their lag and freshness are missing, not zero."""
    return sorted(s["metric"].get("job", "?") for s in _get(url, "/api/v1/query", {"query": "up == 0"}))
