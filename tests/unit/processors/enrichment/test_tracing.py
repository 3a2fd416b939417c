"""A projection batch in its events' traces (processors/enrichment/tracing.py), on a real SDK provider."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from processors.enrichment import tracing
from processors.enrichment.parse import ParsedRow
from processors.enrichment.tracing import EventSpans, SpanBudget
from tests._support.parsedrows import valid_row
from tests._support.span_capture import capture_spans

SAMPLED = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
UNSAMPLED = "00-5bf92f3577b34da6a3ce929d0e0e4736-10f067aa0ba902b7-00"


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    return capture_spans(monkeypatch, tracing)[1]


def _row(event_id: str, traceparent: str | None) -> ParsedRow:
    row = valid_row("io.metalake.asset.upserted.v1", 1, event_id, {"urn": "urn:x"}, datetime.now(UTC))
    return row._replace(traceparent=traceparent)


def test_a_sampled_event_gets_a_child_span_that_its_changes_carry(spans: InMemorySpanExporter) -> None:
    batch_tracer = TracerProvider().get_tracer("batch")
    with batch_tracer.start_as_current_span("enrichment.projection_batch") as batch:
        with EventSpans([_row("e1", SAMPLED), _row("e2", UNSAMPLED), _row("e3", None)], SpanBudget()) as events:
            pass
    (span,) = spans.get_finished_spans()
    assert span.name == "enrichment.project"
    assert span.parent is not None and span.parent.span_id == 0x00F067AA0BA902B7
    assert span.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736  # the event's trace, not the batch's
    assert [link.context.span_id for link in span.links] == [batch.get_span_context().span_id]
    assert events.traceparents["e1"] == f"00-{span.context.trace_id:032x}-{span.context.span_id:016x}-01"
    assert events.traceparents["e2"] == UNSAMPLED  # not sampled: no span, the record's context goes on
    assert "e3" not in events.traceparents
    assert [link.context.span_id for link in batch.links] == [0x00F067AA0BA902B7]  # type: ignore[attr-defined]


def test_a_batch_budget_bounds_the_spans_of_all_its_tenants_and_an_error_marks_them(
    spans: InMemorySpanExporter,
) -> None:
    rows = [_row(f"e{i}", SAMPLED.replace("00f067aa0ba902b7", f"{i + 1:016x}")) for i in range(5)]
    budget = SpanBudget(3)
    with EventSpans(rows[:2], budget):
        pass
    with pytest.raises(RuntimeError), EventSpans(rows[2:], budget) as events:
        raise RuntimeError("MongoDB away")
    finished = spans.get_finished_spans()
    assert len(finished) == 3
    assert [s.status.status_code for s in finished] == [StatusCode.UNSET, StatusCode.UNSET, StatusCode.ERROR]
    assert events.traceparents["e4"] == rows[4].traceparent


def test_without_a_provider_nothing_is_recorded() -> None:
    with EventSpans([_row("e1", SAMPLED)], SpanBudget()) as events:
        assert not trace.get_current_span().is_recording()
    assert events.traceparents["e1"] == SAMPLED
