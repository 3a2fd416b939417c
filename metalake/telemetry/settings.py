"""Logs, traces and metrics of every process (``METALAKE_TELEMETRY__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, SecretStr


class TelemetrySettings(BaseModel):
    service_name: str = "metalake"
    log_level: str = "INFO"
    log_format: Literal["json", "text"] = "json"
    traces_exporter: Literal["none", "console", "otlp"] = "none"
    metrics_exporter: Literal["none", "console", "otlp"] = "none"
    otlp_endpoint: str | None = None
    # The bearer token of every process's ``GET /metrics`` (Prometheus' text format, metalake.telemetry.exposition);
    # unset: the route answers 404, so metrics are off unless an operator chose a token for the scraper.
    metrics_token: SecretStr | None = None
