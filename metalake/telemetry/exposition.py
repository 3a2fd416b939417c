"""``GET /metrics``: the process's OpenTelemetry metrics in Prometheus' text format, behind a bearer token.

One way for every process: the meter provider ``configure_telemetry`` installs carries a ``PrometheusMetricReader``
(opentelemetry-exporter-prometheus) registered in this module's own prometheus-client registry, beside the
client's process collector (``process_resident_memory_bytes``, ``process_cpu_seconds_total``, open files). A scrape
collects both and renders them with prometheus-client; nothing is exported in between. The reader leaves out
``target_info`` and the instrumentation-scope labels, so a series has only the labels its instrument records.

The token is ``telemetry.metrics_token``: unset, the route answers 404 (metrics off); a missing or wrong
``Authorization: Bearer`` answers 401, compared in constant time. The health server (processors) and both FastAPI
apps (``metalake.http.metrics``) answer through :func:`answer`.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from opentelemetry import metrics
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import MetricReader
from opentelemetry.sdk.metrics.view import DropAggregation, View
from opentelemetry.sdk.resources import Resource
from prometheus_client import CollectorRegistry, ProcessCollector, generate_latest
from pydantic import SecretStr

#: The classic text format (version 0.0.4), which every Prometheus parses.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

REGISTRY = CollectorRegistry(auto_describe=False)
ProcessCollector(registry=REGISTRY)

#: FastAPI (0.16x) meters its own requests as ``http.server.*`` with the global provider: the same requests as
#: metalake_http_requests_total, by other names. Left out, so a request is counted once.
VIEWS = (View(instrument_name="http.server.*", aggregation=DropAggregation()),)

_lock = threading.Lock()
_provider: MeterProvider | None = None


def install_meter_provider(resource: Resource | None = None, readers: Sequence[MetricReader] = ()) -> MeterProvider:
    """The process's meter provider, with the Prometheus reader and ``readers``; made and installed globally once
    (OpenTelemetry allows one global provider per process: a later call returns the first)."""
    global _provider
    with _lock:
        if _provider is None:
            reader = PrometheusMetricReader(disable_target_info=True, scope_info_enabled=False, registry=REGISTRY)
            _provider = MeterProvider(
                resource=resource or Resource.create({}), metric_readers=[reader, *readers], views=VIEWS
            )
            metrics.set_meter_provider(_provider)
        return _provider


def render() -> bytes:
    """The exposition: every metric the process recorded, read now."""
    return generate_latest(REGISTRY)


@dataclass(frozen=True)
class Answer:
    status: int
    body: bytes
    content_type: str
    headers: tuple[tuple[str, str], ...] = ()


def authorized(token: SecretStr, authorization: str | None) -> bool:
    """``Authorization: Bearer <token>`` (the scheme in any case), compared in constant time."""
    scheme, _, given = (authorization or "").partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(given.strip().encode(), token.get_secret_value().encode())


def answer(token: SecretStr | None, authorization: str | None) -> Answer:
    """What ``GET /metrics`` answers: 404 when no token is set, 401 without the token, else the exposition."""
    if token is None:
        return Answer(404, b'{"status": "not-found"}', "application/json")
    if not authorized(token, authorization):
        return Answer(401, b'{"status": "unauthorized"}', "application/json", (("WWW-Authenticate", "Bearer"),))
    return Answer(200, render(), CONTENT_TYPE)


__all__ = ["CONTENT_TYPE", "REGISTRY", "Answer", "answer", "authorized", "install_meter_provider", "render"]
