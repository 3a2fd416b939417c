"""The Grafana dashboard of metalake, generated from code: ``make dashboard`` writes deploy/grafana/metalake.json
(``python -m ops.observability.dashboard --out <file>``); a test keeps the file equal to this output and every query on
the metrics of the contract (ops/observability/contract.py).

Import it into Grafana with a Prometheus data source that scrapes metalake (the local stack's, docs/operations.md).
Rows: freshness (the headline number), lag and batches, events and dead letters, deliveries, HTTP, the processes.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ops.stack.scrape_targets import JOBS

_DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}
_WIDTH, _HEIGHT, _COLUMNS = 12, 8, 2


@dataclass(frozen=True)
class Query:
    expr: str
    legend: str


@dataclass(frozen=True)
class Panel:
    title: str
    unit: str
    queries: tuple[Query, ...]
    description: str = ""


def p(quantile: float, metric: str, by: str) -> str:
    """A quantile of a histogram over 5 minutes, per ``by`` (comma-separated labels)."""
    return f"histogram_quantile({quantile}, sum by ({by}, le) (rate({metric}_bucket[5m])))"


def _rows() -> list[tuple[str, list[Panel]]]:
    return [
        ("Freshness (objective: p99 under 30 s)", _freshness()),
        ("Lag and micro-batches", _flow()),
        ("Events and dead letters", _events()),
        ("Deliveries", _deliveries()),
        ("HTTP (admin API, connector worker)", _http()),
        ("Processes and queues", _processes()),
    ]


def _freshness() -> list[Panel]:
    f = "metalake_freshness_seconds"
    return [
        Panel(
            "Freshness p50 / p99 per store",
            "s",
            (Query(p(0.5, f, "store"), "p50 {{store}}"), Query(p(0.99, f, "store"), "p99 {{store}}")),
            "Kafka record timestamp to commit in the store, per event.",
        ),
        Panel(
            "Events slower than 30 s (budget: 1 %)",
            "percentunit",
            (
                Query(
                    f'1 - sum by (store) (rate({f}_bucket{{le=~"30|30\\\\.0"}}[5m]))'
                    f" / sum by (store) (rate({f}_count[5m]))",
                    "{{store}}",
                ),
            ),
        ),
    ]


def _flow() -> list[Panel]:
    return [
        Panel(
            "Consumer lag",
            "short",
            (Query("sum by (job, group, topic) (metalake_consumer_lag_records)", "{{job}} {{group}} {{topic}}"),),
        ),
        Panel(
            "Micro-batch steps p99",
            "s",
            (Query(p(0.99, "metalake_batch_step_seconds", "query, step"), "{{query}} {{step}}"),),
        ),
        Panel(
            "Trino queries through the SQL endpoint p99",
            "s",
            (Query(p(0.99, "metalake_trino_query_seconds", "outcome"), "{{outcome}}"),),
        ),
        Panel(
            "Crawled assets",
            "ops",
            (Query("sum by (connector) (rate(metalake_crawl_assets_total[5m]))", "{{connector}}"),),
        ),
    ]


def _events() -> list[Panel]:
    return [
        Panel(
            "Events by source and outcome",
            "ops",
            (Query("sum by (source, outcome) (rate(metalake_events_total[5m]))", "{{source}} {{outcome}}"),),
        ),
        Panel(
            "Dead letters and refusals (last hour)",
            "short",
            (
                Query(
                    'sum by (source, outcome, reason) (increase(metalake_events_total{outcome!="accepted"}[1h]))',
                    "{{source}} {{outcome}} {{reason}}",
                ),
            ),
            "A tenant behind a spike: the dead letters' records name it (metalake dlq list).",
        ),
        Panel(
            "Webhook and ingest latency p99",
            "s",
            (Query(p(0.99, "metalake_intake_request_seconds", "source"), "{{source}}"),),
        ),
    ]


def _deliveries() -> list[Panel]:
    return [
        Panel(
            "Deliveries by destination and outcome",
            "ops",
            (
                Query(
                    "sum by (destination, outcome) (rate(metalake_deliveries_total[5m]))",
                    "{{destination}} {{outcome}}",
                ),
            ),
        ),
        Panel(
            "Delivery latency p99",
            "s",
            (Query(p(0.99, "metalake_delivery_seconds", "destination"), "{{destination}}"),),
        ),
    ]


def _http() -> list[Panel]:
    return [
        Panel(
            "Requests by route and status",
            "reqps",
            (
                Query(
                    "sum by (job, route, status) (rate(metalake_http_requests_total[5m]))",
                    "{{job}} {{route}} {{status}}",
                ),
            ),
        ),
        Panel(
            "Request latency p99",
            "s",
            (Query(p(0.99, "metalake_http_request_seconds", "job, route"), "{{job}} {{route}}"),),
        ),
    ]


def _processes() -> list[Panel]:
    return [
        Panel(
            "Ready (1) / not ready (0), scraped (up)",
            "short",
            (
                Query("metalake_ready", "ready {{job}} {{instance}}"),
                Query(f'up{{job=~"{"|".join(JOBS)}"}}', "up {{job}}"),
            ),
        ),
        Panel(
            "Erasure and provisioning queues",
            "short",
            (
                Query("max(metalake_erasure_queue_depth)", "erasures pending"),
                Query("max(metalake_provisioning_queue_depth)", "provisioning pending"),
            ),
        ),
        Panel(
            "Oldest pending erasure and tenant (de)provisioning",
            "s",
            (
                Query("max(metalake_erasure_oldest_seconds)", "erasure"),
                Query("max(metalake_provisioning_oldest_seconds)", "provisioning"),
            ),
        ),
        Panel(
            "Tenant (de)provisioning steps, p90",
            "s",
            (Query(p(0.9, "metalake_provisioning_step_seconds", "action, step"), "{{action}} {{step}}"),),
            "The lake worker's steps; one growing with the tenant count is where time to active goes.",
        ),
    ]


def _panel_json(panel: Panel, panel_id: int, x: int, y: int) -> dict[str, Any]:
    return {
        "id": panel_id,
        "type": "timeseries",
        "title": panel.title,
        "description": panel.description,
        "datasource": _DATASOURCE,
        "gridPos": {"h": _HEIGHT, "w": _WIDTH, "x": x, "y": y},
        "fieldConfig": {"defaults": {"unit": panel.unit}, "overrides": []},
        "targets": [
            {"refId": chr(ord("A") + i), "datasource": _DATASOURCE, "expr": q.expr, "legendFormat": q.legend}
            for i, q in enumerate(panel.queries)
        ],
    }


def panels() -> list[dict[str, Any]]:
    """Rows and their panels, laid out two to a line."""
    out: list[dict[str, Any]] = []
    y = 0
    for title, row in _rows():
        out.append({"id": len(out) + 1, "type": "row", "title": title, "collapsed": False, "panels": []})
        out[-1]["gridPos"] = {"h": 1, "w": _WIDTH * _COLUMNS, "x": 0, "y": y}
        y += 1
        for i, panel in enumerate(row):
            out.append(_panel_json(panel, len(out) + 1, (i % _COLUMNS) * _WIDTH, y + (i // _COLUMNS) * _HEIGHT))
        y += -(-len(row) // _COLUMNS) * _HEIGHT
    return out


def dashboard() -> dict[str, Any]:
    return {
        "uid": "metalake",
        "title": "metalake",
        "tags": ["metalake"],
        "timezone": "utc",
        "schemaVersion": 39,
        "refresh": "30s",
        "time": {"from": "now-1h", "to": "now"},
        "templating": {
            "list": [{"name": "datasource", "label": "Prometheus", "type": "datasource", "query": "prometheus"}]
        },
        "panels": panels(),
    }


def render() -> str:
    return json.dumps(dashboard(), indent=2) + "\n"


def expressions() -> list[str]:
    """Every query of the dashboard, in order (what the tests parse and check against the contract)."""
    return [t["expr"] for panel in panels() for t in panel.get("targets", [])]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, help="the file to write (default: standard output)")
    args = parser.parse_args(argv)
    if args.out is None:
        sys.stdout.write(render())
    else:
        args.out.write_text(render())


if __name__ == "__main__":
    main()
