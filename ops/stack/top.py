"""What an operator looks at first, per process, read from the stack's Prometheus (``metalake stack top``).

One instant query per column over every process (the scrape job names the process): up, ready, consumer lag, the
freshness of the last minute (p50/p99 of ``metalake_freshness_seconds``, over both stores) and the events dead-lettered
in the last minute. A process Prometheus has no sample of shows ``-``: not scraped yet, or it exposes no such metric
(only the job measures freshness; the API and the connector worker have no consumer lag).
"""

from __future__ import annotations

import json
import urllib.parse
import urllib.request
from dataclasses import dataclass

#: Column -> PromQL, each answered ``by (job)``.
QUERIES = {
    "up": "max by (job) (up)",
    "ready": "max by (job) (metalake_ready)",
    "lag": "sum by (job) (metalake_consumer_lag_records)",
    "p50_s": "histogram_quantile(0.5, sum by (job, le) (rate(metalake_freshness_seconds_bucket[1m])))",
    "p99_s": "histogram_quantile(0.99, sum by (job, le) (rate(metalake_freshness_seconds_bucket[1m])))",
    "dead_1m": 'sum by (job) (increase(metalake_events_total{outcome="dead_lettered"}[1m]))',
}


class PrometheusUnavailable(RuntimeError):
    """The stack's Prometheus did not answer (not started, or starting)."""


@dataclass(frozen=True)
class Row:
    job: str
    values: dict[str, float]


def _query(url: str, promql: str) -> dict[str, float]:
    address = f"{url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(address, timeout=5) as resp:  # noqa: S310 - the stack's loopback Prometheus
            body = json.loads(resp.read())
    except OSError as exc:
        raise PrometheusUnavailable(f"Prometheus at {url} did not answer ({type(exc).__name__})") from None
    return {s["metric"].get("job", "?"): float(s["value"][1]) for s in body["data"]["result"]}


def read(url: str) -> list[Row]:
    """Every scraped process's row, in job order."""
    columns = {name: _query(url, promql) for name, promql in QUERIES.items()}
    jobs = sorted(set(columns["up"]) - {"prometheus"})
    return [Row(job, {name: values[job] for name, values in columns.items() if job in values}) for job in jobs]


def _cell(value: float | None, column: str) -> str:
    if value is None or value != value:  # no sample, or NaN (no events in the window)
        return "-"
    if column in ("up", "ready"):
        return "yes" if value >= 1 else "NO"
    return f"{value:.2f}" if column.endswith("_s") else f"{value:.0f}"


def render(rows: list[Row]) -> list[str]:
    """The table's lines: a header, then one line per process."""
    lines = [f"{'PROCESS':12} " + " ".join(f"{c.upper():>8}" for c in QUERIES)]
    for row in rows:
        lines.append(f"{row.job:12} " + " ".join(f"{_cell(row.values.get(c), c):>8}" for c in QUERIES))
    return lines
