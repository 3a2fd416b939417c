"""W3C trace context carried in the ``ce_traceparent`` Kafka header (the CloudEvents distributed-tracing extension)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from opentelemetry import context as otel_context
from opentelemetry import trace
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
    return context_of(header_traceparent(headers))


def traceparent_of(span: trace.Span) -> str | None:
    """The W3C ``traceparent`` of ``span`` (None for an invalid one: no SDK, or no span)."""
    ctx = span.get_span_context()
    if not ctx.is_valid:
        return None
    return f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"


def sampled(traceparent: str | None) -> bool:
    """Whether a ``traceparent`` says its trace is recorded (flag 0x01), read from the text alone: the hot paths
    (the stream job's rows) look at every event's, and only the sampled ones cost a span."""
    if not traceparent or len(traceparent) < 55:
        return False
    try:
        return bool(int(traceparent[-2:], 16) & 1)
    except ValueError:
        return False


def context_of(traceparent: str | None) -> otel_context.Context:
    """The trace context a ``traceparent`` text names (empty context if none or invalid)."""
    if not traceparent:
        return otel_context.Context()
    return _propagator.extract({"traceparent": traceparent})


def links_to(traceparents: Iterable[str | None], cap: int) -> list[trace.Link]:
    """Span links to the first ``cap`` sampled contexts among ``traceparents``: a span for a batch of many events
    (one consumer batch, one micro-batch) points at each event's trace instead of joining one of them."""
    links: list[trace.Link] = []
    for value in traceparents:
        if len(links) >= cap:
            break
        if sampled(value):
            ctx = trace.get_current_span(context_of(value)).get_span_context()
            if ctx.is_valid:
                links.append(trace.Link(ctx))
    return links


def header_traceparent(headers: Iterable[tuple[str, str | bytes | None]] | None) -> str | None:
    """The ``ce_traceparent`` text of a record's headers, if any."""
    for name, value in headers or ():
        if name == HEADER and value:
            return value.decode("ascii", "replace") if isinstance(value, bytes) else value
    return None


#: Links one span of a consumer batch keeps (the first sampled records'); a batch of thousands stays one small span.
MAX_BATCH_LINKS = 128
_tracer = trace.get_tracer(__name__)


@contextmanager
def batch_span(name: str, records: Iterable[Any]) -> Iterator[trace.Span]:
    """A consumer's span over one batch of Kafka records (each one's headers: ``(name, value)`` pairs), linked to
    the records' traces; what it publishes continues from it (the producer's span is its child)."""
    links = links_to((header_traceparent(h) for h in records), MAX_BATCH_LINKS)
    with _tracer.start_as_current_span(name, kind=trace.SpanKind.CONSUMER, links=links) as span:
        span.set_attribute("messaging.batch.linked", len(links))
        yield span
