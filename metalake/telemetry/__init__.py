"""OpenTelemetry bootstrap, JSON logs that carry trace id and tenant, and trace context in Kafka headers."""

from metalake.telemetry.logs import bind_tenant, configure_logging
from metalake.telemetry.propagation import extract_context, inject_traceparent
from metalake.telemetry.setup import configure_telemetry

__all__ = ["bind_tenant", "configure_logging", "configure_telemetry", "extract_context", "inject_traceparent"]
