"""The outbound delivery span: a child of the context the change's record carries."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from catalog.changes import Change
from control.subscriptions.store import Subscription
from processors.outbound.runtime import tracing
from processors.outbound.runtime.dispatch import Outcome
from processors.outbound.runtime.tracing import traced_delivery
from tests._support.span_capture import capture_spans

UPSTREAM = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
CHANGE = Change(id="c1", type="io.metalake.propagation.completed.v1", tenant="acme", data={"origin": "urn:x"})
SUB = Subscription(tenant="acme", name="hook", destination="webhook", config={})


@pytest.fixture
def spans(monkeypatch: pytest.MonkeyPatch) -> InMemorySpanExporter:
    return capture_spans(monkeypatch, tracing)[1]


def test_the_delivery_continues_the_trace_of_the_record(spans: InMemorySpanExporter) -> None:
    outcome = traced_delivery(
        lambda: Outcome(SUB, "delivered"), [("ce_traceparent", UPSTREAM.encode())], CHANGE, SUB, attempt=1
    )
    assert outcome.status == "delivered"
    (span,) = spans.get_finished_spans()
    assert (span.name, span.kind) == ("outbound.deliver", SpanKind.CONSUMER)
    assert span.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert span.parent is not None and span.parent.span_id == 0x00F067AA0BA902B7
    attributes = dict(span.attributes or {})
    assert attributes["metalake.destination"] == "webhook"
    assert attributes["metalake.outcome"] == "delivered"
    assert span.status.status_code is StatusCode.UNSET


def test_a_failed_delivery_is_an_error_and_without_a_context_starts_a_trace(spans: InMemorySpanExporter) -> None:
    traced_delivery(lambda: Outcome(SUB, "retry", "503", "RetryableDelivery"), [], CHANGE, SUB, attempt=3)
    (span,) = spans.get_finished_spans()
    assert span.parent is None
    assert span.status.status_code is StatusCode.ERROR
    assert dict(span.attributes or {})["metalake.attempt"] == 3
