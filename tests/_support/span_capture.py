"""Spans a unit test reads back: a tracer provider exporting to memory, installed as a module's tracer."""

from __future__ import annotations

from types import ModuleType

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter


def capture_spans(
    monkeypatch: pytest.MonkeyPatch, module: ModuleType, attribute: str = "tracer"
) -> tuple[TracerProvider, InMemorySpanExporter]:
    """Replace ``module.<attribute>`` with a tracer whose finished spans land in the returned exporter."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    monkeypatch.setattr(module, attribute, provider.get_tracer("tests"))
    return provider, exporter
