"""Structured logs: one JSON object per line with the event name, trace id and tenant. Never payloads."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from opentelemetry import trace

from metalake.telemetry.settings import TelemetrySettings

_tenant: ContextVar[str | None] = ContextVar("metalake_tenant", default=None)

# Attributes every LogRecord has; anything else on a record came from `extra=` and is logged as context.
_STANDARD = frozenset(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime", "taskName"}


@contextmanager
def bind_tenant(tenant_id: str | None) -> Iterator[None]:
    """Every log line written inside the block carries ``tenant``."""
    token = _tenant.set(tenant_id)
    try:
        yield
    finally:
        _tenant.reset(token)


class JsonFormatter(logging.Formatter):
    def __init__(self, component: str) -> None:
        super().__init__()
        self._component = component

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "ts": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "component": self._component,
            "logger": record.name,
            "event": record.getMessage(),
        }
        span = trace.get_current_span().get_span_context()
        if span.is_valid:
            out["trace_id"] = format(span.trace_id, "032x")
            out["span_id"] = format(span.span_id, "016x")
        tenant = getattr(record, "tenant", None) or _tenant.get()
        if tenant:
            out["tenant"] = tenant
        for key, value in vars(record).items():
            if key not in _STANDARD and key not in out:
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return json.dumps(out, default=str)


def configure_logging(settings: TelemetrySettings, component: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter(component))
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level.upper())
    # py4j logs every Java call at INFO/DEBUG; it drowns the job's own lines.
    logging.getLogger("py4j").setLevel(logging.WARNING)
