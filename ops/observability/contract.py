"""The metrics every metalake process exposes on ``/metrics`` (docs/operations.md#metrics), by name as exposed.

The dashboard (ops/observability/dashboard.py) and the alert rules (deploy/prometheus/rules/) may name only these;
the tests hold both to it. No series has a tenant label (bounded at 10,000 tenants).
"""

from __future__ import annotations

import re
from typing import Literal

Kind = Literal["counter", "gauge", "histogram"]

METRICS: dict[str, Kind] = {
    "metalake_freshness_seconds": "histogram",
    "metalake_consumer_lag_records": "gauge",
    "metalake_batch_step_seconds": "histogram",
    "metalake_events_total": "counter",
    "metalake_intake_request_seconds": "histogram",
    "metalake_deliveries_total": "counter",
    "metalake_delivery_seconds": "histogram",
    "metalake_http_requests_total": "counter",
    "metalake_http_request_seconds": "histogram",
    "metalake_crawl_assets_total": "counter",
    "metalake_erasure_queue_depth": "gauge",
    "metalake_erasure_oldest_seconds": "gauge",
    "metalake_provisioning_queue_depth": "gauge",
    "metalake_provisioning_oldest_seconds": "gauge",
    "metalake_provisioning_step_seconds": "histogram",
    "metalake_trino_query_seconds": "histogram",
    "metalake_ready": "gauge",
}
_HISTOGRAM_SERIES = ("_bucket", "_count", "_sum")
# A metric name in PromQL: recording rules' names (metalake:...) have colons and are not metrics of the processes.
_NAME = re.compile(r"\bmetalake_[a-z0-9_]+")


def metric_of(series: str) -> str:
    """The metric a series name belongs to: a histogram's ``_bucket``, ``_count`` and ``_sum`` are its own."""
    for suffix in _HISTOGRAM_SERIES:
        base = series.removesuffix(suffix)
        if base != series and METRICS.get(base) == "histogram":
            return base
    return series


def metrics_named(promql: str) -> set[str]:
    """The metrics a PromQL expression (or a rules file's text) names."""
    return {metric_of(name) for name in _NAME.findall(promql)}
