"""JSON log lines: event name, component, tenant, trace ids, extra context."""

from __future__ import annotations

import io
import json
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.trace import Tracer

from metalake.telemetry.logs import JsonFormatter, bind_tenant, configure_logging
from metalake.telemetry.settings import TelemetrySettings

BASE_KEYS = {"ts", "level", "component", "logger", "event"}


class Capture:
    def __init__(self) -> None:
        self.stream = io.StringIO()
        self.logger = logging.getLogger("metalake.tests.logs")
        self.handler = logging.StreamHandler(self.stream)
        self.handler.setFormatter(JsonFormatter("unit"))

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.stream.getvalue().splitlines()]

    def last(self) -> dict[str, Any]:
        return self.lines()[-1]


@pytest.fixture
def capture() -> Iterator[Capture]:
    cap = Capture()
    old_level, old_propagate = cap.logger.level, cap.logger.propagate
    cap.logger.addHandler(cap.handler)
    cap.logger.setLevel(logging.DEBUG)
    cap.logger.propagate = False
    try:
        yield cap
    finally:
        cap.logger.removeHandler(cap.handler)
        cap.logger.setLevel(old_level)
        cap.logger.propagate = old_propagate


def test_plain_line(capture: Capture) -> None:
    capture.logger.info("stack.started")
    line = capture.last()
    assert set(line) == BASE_KEYS
    assert line["event"] == "stack.started"
    assert line["level"] == "info"
    assert line["component"] == "unit"
    assert line["logger"] == "metalake.tests.logs"
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00", line["ts"])


def test_one_json_object_per_line(capture: Capture) -> None:
    capture.logger.warning("a\nb")
    capture.logger.debug("c")
    assert [(line["event"], line["level"]) for line in capture.lines()] == [("a\nb", "warning"), ("c", "debug")]


def test_message_arguments_are_formatted(capture: Capture) -> None:
    capture.logger.info("batch %s of %d", "x", 3)
    assert capture.last()["event"] == "batch x of 3"


def test_extra_fields(capture: Capture) -> None:
    capture.logger.info("batch.done", extra={"records": 42, "topic": "metalake.events.bulk", "path": Path("/lake")})
    line = capture.last()
    assert set(line) == BASE_KEYS | {"records", "topic", "path"}
    assert line["records"] == 42
    assert line["topic"] == "metalake.events.bulk"
    assert line["path"] == "/lake"


def test_extra_cannot_overwrite_the_event(capture: Capture) -> None:
    capture.logger.info("real.event", extra={"event": "forged", "level": "forged"})
    line = capture.last()
    assert line["event"] == "real.event"
    assert line["level"] == "info"


def test_tenant_from_bind_tenant(capture: Capture) -> None:
    with bind_tenant("acme"):
        capture.logger.info("inside")
        with bind_tenant("other-co"):
            capture.logger.info("nested")
        capture.logger.info("inside.again")
    capture.logger.info("outside")
    assert [line.get("tenant") for line in capture.lines()] == ["acme", "other-co", "acme", None]


def test_extra_tenant_wins_over_the_bound_one(capture: Capture) -> None:
    with bind_tenant("acme"):
        capture.logger.info("x", extra={"tenant": "other-co"})
    assert capture.last()["tenant"] == "other-co"


def test_bind_tenant_none_clears(capture: Capture) -> None:
    with bind_tenant("acme"), bind_tenant(None):
        capture.logger.info("x")
    assert "tenant" not in capture.last()


def test_trace_ids_inside_a_span(capture: Capture, tracer: Tracer) -> None:
    with tracer.start_as_current_span("work") as span:
        capture.logger.info("in.span")
        ctx = span.get_span_context()
    capture.logger.info("after.span")
    inside, after = capture.lines()
    assert inside["trace_id"] == format(ctx.trace_id, "032x")
    assert inside["span_id"] == format(ctx.span_id, "016x")
    assert len(inside["trace_id"]) == 32
    assert "trace_id" not in after
    assert "span_id" not in after


def test_exception(capture: Capture) -> None:
    try:
        raise RuntimeError("boom")
    except RuntimeError:
        capture.logger.exception("failed")
    line = capture.last()
    assert line["level"] == "error"
    assert line["exception"].startswith("Traceback")
    assert line["exception"].endswith("RuntimeError: boom")


@pytest.fixture
def restore_root() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    py4j = logging.getLogger("py4j").level
    try:
        yield root
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
        logging.getLogger("py4j").setLevel(py4j)


def test_configure_logging_json(restore_root: logging.Logger) -> None:
    configure_logging(TelemetrySettings(log_level="debug"), "api")
    (handler,) = restore_root.handlers
    assert isinstance(handler.formatter, JsonFormatter)
    assert restore_root.level == logging.DEBUG
    assert logging.getLogger("py4j").level == logging.WARNING


def test_configure_logging_text(restore_root: logging.Logger) -> None:
    configure_logging(TelemetrySettings(log_format="text", log_level="warning"), "api")
    (handler,) = restore_root.handlers
    assert handler.formatter is not None
    assert not isinstance(handler.formatter, JsonFormatter)
    assert restore_root.level == logging.WARNING
