"""W3C trace context carried in the ``ce_traceparent`` Kafka header (the CloudEvents distributed-tracing extension)."""

from __future__ import annotations

from collections.abc import Iterable

from opentelemetry import context as otel_context
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

_propagator = TraceContextTextMapPropagator()
HEADER = "ce_traceparent"

Headers = list[tuple[str, bytes]]


def inject_traceparent(headers: Headers) -> Headers:
    """Add the current span as ``ce_traceparent`` unless the event already carries one (it came from upstream)."""
    if any(name == HEADER for name, _ in headers):
        return headers
    carrier: dict[str, str] = {}
    _propagator.inject(carrier)
    if "traceparent" in carrier:
        return [*headers, (HEADER, carrier["traceparent"].encode())]
    return headers


def extract_context(headers: Iterable[tuple[str, bytes | None]] | None) -> otel_context.Context:
    """The trace context an event was produced in (empty context if none)."""
    for name, value in headers or ():
        if name == HEADER and value:
            return _propagator.extract({"traceparent": value.decode("ascii", "replace")})
    return otel_context.Context()
