"""The metrics every process exposes on ``GET /metrics`` (docs/operations.md#metrics), one instrument per name.

The instruments are named as Prometheus shows them: the exporter (``metalake.telemetry.exposition``) appends a unit
only when the name does not end with it already, and a counter's ``_total`` is kept once, so these names are the
exposed ones. Their labels are a fixed vocabulary, never a tenant (10,000 tenants would make as many series): the
structured logs and the dead letters name the tenant behind a spike.

The instruments are made on OpenTelemetry's global meter: until ``configure_telemetry`` installs the process's meter
provider they record nothing, then bind to it (the API's proxy instruments).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping

from opentelemetry import metrics
from opentelemetry.metrics import CallbackOptions, Observation

from metalake.telemetry.exposition import REGISTRY
from metalake.telemetry.histogram import BulkHistogram

log = logging.getLogger(__name__)

#: Seconds, resolving 0.05 s to 120 s (the freshness objective, p99 under 30 s, falls on a bound).
SECONDS_BUCKETS: tuple[float, ...] = (
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    45.0,
    60.0,
    90.0,
    120.0,
)

_METER = metrics.get_meter("metalake")


def _seconds(name: str, description: str) -> metrics.Histogram:
    return _METER.create_histogram(
        name, unit="s", description=description, explicit_bucket_boundaries_advisory=SECONDS_BUCKETS
    )


# Per event, at the job's volume: a histogram that takes an observation with its count (metalake.telemetry.histogram
# says why), in the same registry as the exporter's series.
FRESHNESS = BulkHistogram(
    "metalake_freshness_seconds",
    "Kafka record timestamp to the commit in that store (store, query), per event",
    ("store", "query"),
    SECONDS_BUCKETS,
)
REGISTRY.register(FRESHNESS)
BATCH_STEP = _seconds("metalake_batch_step_seconds", "A streaming micro-batch's steps (query, step)")
INTAKE_REQUEST = _seconds("metalake_intake_request_seconds", "Webhook and ingest request latency (source)")
DELIVERY = _seconds("metalake_delivery_seconds", "One outbound delivery attempt (destination)")
HTTP_REQUEST = _seconds("metalake_http_request_seconds", "HTTP requests by route template and method")
PROVISIONING_STEP = _seconds(
    "metalake_provisioning_step_seconds", "A tenant (de)provisioning step in the lake worker (action, step, outcome)"
)
TRINO_QUERY = _seconds("metalake_trino_query_seconds", "SQL endpoint queries in Trino (outcome)")

EVENTS = _METER.create_counter("metalake_events_total", description="Intake and job outcomes (source, outcome, reason)")
DELIVERIES = _METER.create_counter(
    "metalake_deliveries_total", description="Outbound deliveries (destination, outcome)"
)
HTTP_REQUESTS = _METER.create_counter(
    "metalake_http_requests_total", description="HTTP requests by route template, method and status"
)
CRAWL_ASSETS = _METER.create_counter("metalake_crawl_assets_total", description="Assets a crawl emitted (connector)")

#: A source of observations: ``(value, labels)`` pairs read when the metrics are collected (at scrape time).
Source = Callable[[], Iterable[tuple[float, Mapping[str, str]]]]


class ObservedGauge:
    """A gauge read at scrape time from the sources a process registers (a consumer's lag, a queue's depth).

    A source that raises is logged and skipped: one broken reading must not empty the whole exposition."""

    def __init__(self, name: str, description: str, unit: str = "") -> None:
        self.name = name
        self._sources: dict[int, Source] = {}
        self._lock = threading.Lock()
        self._next = 0
        _METER.create_observable_gauge(name, callbacks=[self._observe], unit=unit, description=description)

    def watch(self, source: Source) -> Callable[[], None]:
        """Add ``source``; the function returned removes it (a consumer closed, a server stopped)."""
        with self._lock:
            key, self._next = self._next, self._next + 1
            self._sources[key] = source

        def unwatch() -> None:
            with self._lock:
                self._sources.pop(key, None)

        return unwatch

    def _observe(self, _options: CallbackOptions) -> Iterable[Observation]:
        with self._lock:
            sources = list(self._sources.values())
        out: list[Observation] = []
        for source in sources:
            try:
                out.extend(Observation(value, dict(labels)) for value, labels in source())
            except Exception as exc:  # noqa: BLE001 - a failed reading is left out, named in the log
                log.warning("metrics.source_failed", extra={"metric": self.name, "error": type(exc).__name__})
        return out


READY = ObservedGauge("metalake_ready", "1 when the process's readiness checks pass, else 0")
CONSUMER_LAG = ObservedGauge(
    "metalake_consumer_lag_records", "End offset minus committed (processed) offset (group, topic, partition)"
)
ERASURE_QUEUE_DEPTH = ObservedGauge("metalake_erasure_queue_depth", "Erasure requests not yet done")
ERASURE_OLDEST = ObservedGauge("metalake_erasure_oldest_seconds", "Age of the oldest pending erasure", unit="s")
PROVISIONING_QUEUE_DEPTH = ObservedGauge("metalake_provisioning_queue_depth", "Provisioning work pending")
PROVISIONING_OLDEST = ObservedGauge(
    "metalake_provisioning_oldest_seconds", "Age of the oldest pending tenant (de)provisioning", unit="s"
)


def readiness(ready: Callable[[], bool]) -> Callable[[], None]:
    """Report ``ready()`` as ``metalake_ready`` (1 or 0), evaluated at each scrape; returns the unwatch function."""
    return READY.watch(lambda: [(1.0 if ready() else 0.0, {})])


__all__ = [
    "BATCH_STEP",
    "CONSUMER_LAG",
    "CRAWL_ASSETS",
    "DELIVERIES",
    "DELIVERY",
    "ERASURE_OLDEST",
    "ERASURE_QUEUE_DEPTH",
    "EVENTS",
    "FRESHNESS",
    "HTTP_REQUEST",
    "HTTP_REQUESTS",
    "INTAKE_REQUEST",
    "PROVISIONING_OLDEST",
    "PROVISIONING_QUEUE_DEPTH",
    "PROVISIONING_STEP",
    "READY",
    "SECONDS_BUCKETS",
    "TRINO_QUERY",
    "ObservedGauge",
    "Source",
    "readiness",
]
