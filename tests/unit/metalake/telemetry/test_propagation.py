"""W3C trace context in the ``ce_traceparent`` header."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import Tracer

from metalake.telemetry.propagation import (
    HEADER,
    extract_context,
    header_traceparent,
    inject_traceparent,
    links_to,
    sampled,
    traceparent_of,
)

UPSTREAM = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
BASE: list[tuple[str, bytes]] = [("content-type", b"application/json"), ("ce_id", b"1")]


def test_header_name() -> None:
    assert HEADER == "ce_traceparent"


def test_no_span_no_header() -> None:
    assert inject_traceparent(list(BASE)) == BASE


def test_inject_inside_a_span(tracer: Tracer) -> None:
    with tracer.start_as_current_span("publish") as span:
        headers = inject_traceparent(list(BASE))
        ctx = span.get_span_context()
    assert ctx.trace_flags.sampled
    # The SDK may also set the W3C level-2 "random" flag (0x02): take the flags from the span.
    expected = f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}".encode()
    assert headers == [*BASE, ("ce_traceparent", expected)]


def test_inject_does_not_modify_its_argument(tracer: Tracer) -> None:
    original = list(BASE)
    with tracer.start_as_current_span("publish"):
        inject_traceparent(original)
    assert original == BASE


def test_existing_traceparent_is_kept(tracer: Tracer) -> None:
    headers = [*BASE, ("ce_traceparent", UPSTREAM.encode())]
    with tracer.start_as_current_span("publish"):
        out = inject_traceparent(list(headers))
    assert out == headers
    assert [name for name, _ in out].count("ce_traceparent") == 1


def test_extract_round_trip(tracer: Tracer) -> None:
    with tracer.start_as_current_span("publish") as span:
        headers = inject_traceparent(list(BASE))
        sent = span.get_span_context()
    received = trace.get_current_span(extract_context(headers)).get_span_context()
    assert received.is_valid
    assert received.is_remote
    assert received.trace_id == sent.trace_id
    assert received.span_id == sent.span_id
    assert received.trace_flags.sampled


def test_extract_continues_the_trace_in_a_child_span(tracer: Tracer) -> None:
    ctx = extract_context([("ce_traceparent", UPSTREAM.encode())])
    with tracer.start_as_current_span("consume", context=ctx) as span:
        child = span.get_span_context()
    assert child.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert child.span_id != 0x00F067AA0BA902B7


def test_extract_of_a_known_value() -> None:
    ctx = extract_context([*BASE, ("ce_traceparent", UPSTREAM.encode())])
    received = trace.get_current_span(ctx).get_span_context()
    assert received.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736
    assert received.span_id == 0x00F067AA0BA902B7


def test_extract_without_header_is_empty() -> None:
    for headers in (None, [], list(BASE), [("ce_traceparent", None)], [("ce_traceparent", b"")]):
        ctx = extract_context(headers)
        assert dict(ctx) == {}
        assert not trace.get_current_span(ctx).get_span_context().is_valid


def test_extract_of_a_malformed_header_is_invalid() -> None:
    ctx = extract_context([("ce_traceparent", b"00-not-a-trace-01")])
    assert not trace.get_current_span(ctx).get_span_context().is_valid


def test_sampled_reads_the_flags_of_the_text() -> None:
    assert sampled(UPSTREAM)
    assert not sampled(UPSTREAM[:-2] + "00")
    assert sampled(UPSTREAM[:-2] + "03")  # sampled and random
    assert not sampled(None)
    assert not sampled("garbage")
    assert not sampled(UPSTREAM[:-2] + "zz")


def test_traceparent_of_a_span_and_of_none(tracer: Tracer) -> None:
    with tracer.start_as_current_span("s") as span:
        value = traceparent_of(span)
    ctx = span.get_span_context()
    assert value == f"00-{ctx.trace_id:032x}-{ctx.span_id:016x}-{int(ctx.trace_flags):02x}"
    assert traceparent_of(trace.INVALID_SPAN) is None


def test_links_go_to_the_first_sampled_contexts_only() -> None:
    values = [UPSTREAM[:-2] + "00", None, UPSTREAM, UPSTREAM.replace("00f067aa0ba902b7", "00f067aa0ba902b8"), UPSTREAM]
    links = links_to(values, cap=2)
    assert [link.context.span_id for link in links] == [0x00F067AA0BA902B7, 0x00F067AA0BA902B8]
    assert all(link.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736 for link in links)


def test_header_traceparent_of_bytes_and_text() -> None:
    assert header_traceparent([*BASE, ("ce_traceparent", UPSTREAM.encode())]) == UPSTREAM
    assert header_traceparent([("ce_traceparent", UPSTREAM)]) == UPSTREAM
    assert header_traceparent(BASE) is None
    assert header_traceparent(None) is None
