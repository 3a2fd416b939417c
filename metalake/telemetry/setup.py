"""Tracer and meter providers, configured once per process from settings."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.sdk.metrics.export import ConsoleMetricExporter, MetricReader, PeriodicExportingMetricReader
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from metalake import __version__
from metalake.telemetry.exposition import install_meter_provider
from metalake.telemetry.logs import configure_logging
from metalake.telemetry.settings import TelemetrySettings


class TelemetryConfigError(RuntimeError):
    """The telemetry settings ask for something this installation cannot do."""


def signal_url(endpoint: str | None, signal: str) -> str | None:
    """The OTLP/HTTP URL of one signal (``traces``, ``metrics``) under ``telemetry.otlp_endpoint``, the collector's
    base URL as ``OTEL_EXPORTER_OTLP_ENDPOINT`` takes it (``http://collector:4318`` -> ``.../v1/traces``); a URL that
    already names the signal's path is kept. None: the exporter's own default (``OTEL_EXPORTER_OTLP_*``, else
    ``http://localhost:4318``)."""
    if not endpoint:
        return None
    path = f"/v1/{signal}"
    return endpoint if endpoint.rstrip("/").endswith(path) else endpoint.rstrip("/") + path


def _span_exporter(settings: TelemetrySettings) -> SpanExporter | None:
    if settings.traces_exporter == "console":
        return ConsoleSpanExporter()
    if settings.traces_exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError as exc:
            raise TelemetryConfigError(
                "METALAKE_TELEMETRY__TRACES_EXPORTER=otlp needs opentelemetry-exporter-otlp-proto-http (a dependency of"
                " metalake: reinstall it)"
            ) from exc
        exporter: SpanExporter = OTLPSpanExporter(endpoint=signal_url(settings.otlp_endpoint, "traces"))
        return exporter
    return None


def _metric_readers(settings: TelemetrySettings) -> list[MetricReader]:
    if settings.metrics_exporter == "console":
        return [PeriodicExportingMetricReader(ConsoleMetricExporter(), export_interval_millis=60_000)]
    if settings.metrics_exporter == "otlp":
        try:
            from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter  # type: ignore[import-not-found,import-untyped,unused-ignore]
        except ImportError as exc:
            raise TelemetryConfigError(
                "METALAKE_TELEMETRY__METRICS_EXPORTER=otlp needs: pip install opentelemetry-exporter-otlp-proto-http"
            ) from exc
        return [
            PeriodicExportingMetricReader(OTLPMetricExporter(endpoint=signal_url(settings.otlp_endpoint, "metrics")))
        ]
    return []


def configure_telemetry(settings: TelemetrySettings, component: str) -> TracerProvider:
    """Install the global tracer and meter providers and JSON logging for one process (``component``)."""
    configure_logging(settings, component)
    resource = Resource.create(
        {"service.name": settings.service_name, "service.version": __version__, "service.component": component}
    )
    tracer_provider = install_tracer_provider(settings, resource)
    # Always with the Prometheus reader: GET /metrics reads it at scrape time (off, 404, without a metrics token).
    install_meter_provider(resource, _metric_readers(settings))
    return tracer_provider


def install_tracer_provider(settings: TelemetrySettings, resource: Resource) -> TracerProvider:
    """The global tracer provider, exporting as ``telemetry.traces_exporter`` says (the admin API, which keeps
    uvicorn's logging, installs only this and the meter provider)."""
    tracer_provider = TracerProvider(resource=resource)
    exporter = _span_exporter(settings)
    if exporter is not None:
        tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    trace.set_tracer_provider(tracer_provider)
    return tracer_provider
