"""The one dead-letter record of every DLQ topic: original key, value and headers, then the context headers."""

from __future__ import annotations

from metalake.kafka import RawRecord
from metalake.kafka.dlq import MAX_MESSAGE, DeadLetter, dead_letter_record, read_dead_letter

ORIGINAL = [("ce_id", b"e1"), ("content-type", b"application/json")]


def test_every_context_header_in_the_fixed_order() -> None:
    letter = DeadLetter(
        reason="data/version: must satisfy type='integer'",
        error_class="InvalidChange",
        stage="outbound",
        tenant_id="acme",
        plugin="slack",
        origin_topic="metalake.changes",
        origin_partition=2,
        origin_offset=1234,
        attempts=3,
        connector="hook",
        origin="webhook:/webhooks/test-hook/acme",
        subscription="pii-alerts",
    )
    record = dead_letter_record("metalake.outbound.dlq", "c-1", b"acme:urn:x", b'{"x":1}', ORIGINAL, letter)
    assert record == RawRecord(
        "metalake.outbound.dlq",
        "c-1",
        b"acme:urn:x",
        b'{"x":1}',
        [
            ("ce_id", b"e1"),
            ("content-type", b"application/json"),
            ("error.class", b"InvalidChange"),
            ("error.message", b"data/version: must satisfy type='integer'"),
            ("stage", b"outbound"),
            ("plugin", b"slack"),
            ("tenant_id", b"acme"),
            ("origin.topic", b"metalake.changes"),
            ("origin.partition", b"2"),
            ("origin.offset", b"1234"),
            ("attempts", b"3"),
            ("connector", b"hook"),
            ("origin", b"webhook:/webhooks/test-hook/acme"),
            ("outbound.subscription", b"pii-alerts"),
        ],
    )


def test_the_connector_workers_dead_letter() -> None:
    letter = DeadLetter(
        reason="tables: not a list",
        error_class="InvalidPayload",
        stage="mapping",
        tenant_id="acme",
        plugin="testhook",
        connector="hook",
        origin="webhook:/webhooks/test-hook/acme",
    )
    record = dead_letter_record("metalake.connectors.dlq", "d", b"acme:hook", b"{}", ORIGINAL[1:], letter)
    assert record.headers == [
        ("content-type", b"application/json"),
        ("error.class", b"InvalidPayload"),
        ("error.message", b"tables: not a list"),
        ("stage", b"mapping"),
        ("plugin", b"testhook"),
        ("tenant_id", b"acme"),
        ("attempts", b"1"),
        ("connector", b"hook"),
        ("origin", b"webhook:/webhooks/test-hook/acme"),
    ]


def test_absent_context_is_left_out_and_absent_bytes_stay_absent() -> None:
    record = dead_letter_record("t", "r", None, None, [], DeadLetter(reason="bad", error_class="E", stage="s"))
    assert (record.key, record.value) == (None, None)
    assert record.headers == [("error.class", b"E"), ("error.message", b"bad"), ("stage", b"s"), ("attempts", b"1")]


def test_zero_partition_and_offset_are_kept() -> None:
    letter = DeadLetter(reason="r", error_class="E", stage="outbound", origin_partition=0, origin_offset=0)
    headers = dict(dead_letter_record("t", "r", None, None, [], letter).headers)
    assert (headers["origin.partition"], headers["origin.offset"]) == (b"0", b"0")


def test_the_message_is_utf8_and_capped() -> None:
    umlauts = DeadLetter(reason="größe ungültig", error_class="E", stage="outbound")
    assert (
        dict(dead_letter_record("t", "r", None, None, [], umlauts).headers)["error.message"]
        == "größe ungültig".encode()
    )
    long = DeadLetter(reason="x" * (MAX_MESSAGE + 10), error_class="E", stage="outbound")
    assert dict(dead_letter_record("t", "r", None, None, [], long).headers)["error.message"] == b"x" * MAX_MESSAGE


def test_read_returns_what_was_written() -> None:
    letter = DeadLetter(
        reason="r",
        error_class="E",
        stage="outbound",
        tenant_id="acme",
        plugin="jira",
        origin_topic="metalake.outbound.retry",
        origin_partition=0,
        origin_offset=7,
        attempts=12,
        subscription="s",
    )
    assert read_dead_letter(dead_letter_record("t", "r", None, None, ORIGINAL, letter).headers) == letter
    minimal = DeadLetter(reason="r", error_class="E", stage="mapping", connector="c", origin="source:acme/c/p")
    assert read_dead_letter(dead_letter_record("t", "r", None, None, [], minimal).headers) == minimal


def test_read_refuses_records_that_are_not_dead_letters_and_tolerates_broken_numbers() -> None:
    assert read_dead_letter(ORIGINAL) is None
    assert read_dead_letter(None) is None
    headers = [
        ("error.class", b"E"),
        ("error.message", b"r"),
        ("stage", b"s"),
        ("origin.offset", b"x"),
        ("attempts", None),
    ]
    assert read_dead_letter(headers) == DeadLetter(reason="r", error_class="E", stage="s")
