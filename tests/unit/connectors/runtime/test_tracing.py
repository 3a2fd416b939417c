"""The intake span: the caller's traceparent continued (or the framework's request span), named in the answer."""

from __future__ import annotations

import pytest
from fastapi.responses import JSONResponse
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from connectors.runtime import tracing
from connectors.runtime.tracing import answer_traceparent, intake_span
from tests._support.span_capture import capture_spans

CALLER = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


@pytest.fixture
def provider(monkeypatch: pytest.MonkeyPatch) -> tuple[TracerProvider, InMemorySpanExporter]:
    return capture_spans(monkeypatch, tracing, "_tracer")


def test_the_callers_trace_is_continued_and_named_in_the_answer(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    with intake_span("connect.ingest", CALLER, {"metalake.tenant": "acme"}) as span:
        response = answer_traceparent(JSONResponse({}), span)
    (done,) = provider[1].get_finished_spans()
    assert (done.name, done.kind) == ("connect.ingest", SpanKind.SERVER)
    assert done.parent is not None and done.parent.span_id == 0x00F067AA0BA902B7
    expected = f"00-4bf92f3577b34da6a3ce929d0e0e4736-{done.context.span_id:016x}-{int(done.context.trace_flags):02x}"
    assert response.headers["traceparent"] == expected


def test_inside_the_frameworks_request_span_it_is_that_spans_child(
    provider: tuple[TracerProvider, InMemorySpanExporter],
) -> None:
    with provider[0].get_tracer("server").start_as_current_span("POST /v1/events") as server:
        with intake_span("connect.ingest", CALLER, {}):
            pass
    intake = next(s for s in provider[1].get_finished_spans() if s.name == "connect.ingest")
    assert intake.parent is not None and intake.parent.span_id == server.get_span_context().span_id


def test_without_tracing_no_header() -> None:
    with intake_span("connect.ingest", None, {}) as span:
        response = answer_traceparent(JSONResponse({}), span)
    assert "traceparent" not in response.headers
