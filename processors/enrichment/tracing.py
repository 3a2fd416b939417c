"""A projection batch in its events' traces.

A micro-batch holds many events of many traces, so its own span (``enrichment.projection_batch``) starts a trace of
its own and links to the events' contexts. Each tenant's part then puts a short ``enrichment.project`` span into the
trace of each of its *sampled* events (child of the context the event's record carries, linked back to the batch),
from the start of the tenant's MongoDB writes to their end; the change events the batch publishes carry that span's
context on, so the outbound delivery of a change continues the event's trace. An event whose trace is not sampled
costs a look at its ``traceparent`` text and nothing else; at most :data:`MAX_EVENT_SPANS` events of a batch, all
its tenants together, get a span (the rest keep their record's context: their trace skips this step).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from types import TracebackType

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from metalake.telemetry.propagation import context_of, sampled, traceparent_of
from processors.enrichment.parse import ParsedRow

tracer = trace.get_tracer(__name__)

MAX_EVENT_SPANS = 128


class SpanBudget:
    """The event spans one batch may still start, shared by its tenants' threads."""

    def __init__(self, spans: int = MAX_EVENT_SPANS) -> None:
        self._left = spans
        self._lock = threading.Lock()

    def take(self) -> bool:
        with self._lock:
            if self._left <= 0:
                return False
            self._left -= 1
            return True


class EventSpans:
    """``with EventSpans(rows, budget) as spans:`` around a tenant's writes; ``spans.traceparents`` maps each event
    id to the context its changes carry."""

    def __init__(self, rows: Sequence[ParsedRow], budget: SpanBudget) -> None:
        self._rows, self._budget = rows, budget
        self._spans: list[trace.Span] = []
        self.traceparents: dict[str, str] = {}

    def __enter__(self) -> EventSpans:
        batch = trace.get_current_span()
        back = [trace.Link(batch.get_span_context())] if batch.get_span_context().is_valid else []
        recording = True
        for row in self._rows:
            value = row.traceparent
            if not row.event_id or not value:
                continue
            if recording and sampled(value) and self._budget.take():
                span = self._start(row.event_id, row.event_type, value, back, batch)
                # Not recorded although its trace is sampled: tracing is off here (no SDK), stop trying.
                recording = span is not None
                if span is not None:
                    value = traceparent_of(span) or value
            self.traceparents[row.event_id] = value
        return self

    def _start(
        self, event_id: str, event_type: str | None, value: str, back: list[trace.Link], batch: trace.Span
    ) -> trace.Span | None:
        parent = context_of(value)
        attributes = {"metalake.event_id": event_id, "metalake.event_type": event_type or ""}
        span = tracer.start_span("enrichment.project", context=parent, links=back, attributes=attributes)
        if not span.is_recording():
            return None
        batch.add_link(trace.get_current_span(parent).get_span_context(), {"metalake.event_id": event_id})
        self._spans.append(span)
        return span

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        for span in self._spans:
            if exc is not None:
                span.set_status(Status(StatusCode.ERROR, type(exc).__name__))
            span.end()
