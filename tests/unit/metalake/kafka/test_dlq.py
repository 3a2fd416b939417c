"""Dead-letter context headers."""

from __future__ import annotations

from metalake.kafka.dlq import DeadLetter, dead_letter_headers


def test_all_headers() -> None:
    dl = DeadLetter(
        reason="data/version: must satisfy type='integer'",
        error_class="InvalidEvent",
        stage="enrichment",
        tenant_id="acme",
        plugin="montecarlo",
        origin_topic="metalake.events.priority",
        origin_partition=2,
        origin_offset=1234,
        attempts=3,
    )
    assert dead_letter_headers(dl) == [
        ("error.class", b"InvalidEvent"),
        ("error.message", b"data/version: must satisfy type='integer'"),
        ("stage", b"enrichment"),
        ("plugin", b"montecarlo"),
        ("tenant_id", b"acme"),
        ("origin.topic", b"metalake.events.priority"),
        ("origin.partition", b"2"),
        ("origin.offset", b"1234"),
        ("attempts", b"3"),
    ]


def test_absent_context_is_left_out() -> None:
    dl = DeadLetter(reason="bad", error_class="ValueError", stage="connectors")
    assert dead_letter_headers(dl) == [
        ("error.class", b"ValueError"),
        ("error.message", b"bad"),
        ("stage", b"connectors"),
        ("attempts", b"1"),
    ]


def test_zero_partition_and_offset_are_kept() -> None:
    dl = DeadLetter(reason="r", error_class="E", stage="outbound", origin_partition=0, origin_offset=0)
    headers = dict(dead_letter_headers(dl))
    assert headers["origin.partition"] == b"0"
    assert headers["origin.offset"] == b"0"


def test_message_is_utf8() -> None:
    dl = DeadLetter(reason="größe ungültig", error_class="E", stage="outbound")
    assert dict(dead_letter_headers(dl))["error.message"] == "größe ungültig".encode()
