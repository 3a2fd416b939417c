"""The intake's span: one per webhook delivery or ingest request, continuing the caller's ``traceparent`` header
when it sent one. Its events' Kafka records carry the trace on (``ce_traceparent``, set by the producer's span), and
the answer's ``traceparent`` header names it: a sender finds the trace of what it sent (docs/operations.md#traces).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import TypeVar

from fastapi.responses import Response
from opentelemetry import trace

from metalake.telemetry.propagation import context_of, traceparent_of

_tracer = trace.get_tracer(__name__)
Answer = TypeVar("Answer", bound=Response)


@contextmanager
def intake_span(name: str, traceparent: str | None, attributes: Mapping[str, str]) -> Iterator[trace.Span]:
    """A child of the request's server span when the web framework made one (FastAPI's own telemetry extracts the
    caller's ``traceparent`` into it), else of the caller's ``traceparent`` itself, else a new trace."""
    current = trace.get_current_span().get_span_context().is_valid
    parent = context_of(traceparent) if traceparent and not current else None
    with _tracer.start_as_current_span(name, context=parent, kind=trace.SpanKind.SERVER, attributes=attributes) as span:
        yield span


def answer_traceparent(response: Answer, span: trace.Span) -> Answer:
    """``response`` with the span's ``traceparent`` (none when tracing is off)."""
    value = traceparent_of(span)
    if value is not None:
        response.headers["traceparent"] = value
    return response
