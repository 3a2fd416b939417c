"""Error tolerance like Kafka Connect's ``errors.tolerance=none|all``, and the dead letters it produces.

With ``all``, a record that fails a transform, validation or the plugin's mapping becomes a dead letter for the
connectors DLQ topic (``tenants.naming.dlq_topic("connectors")``): the original bytes as the value, the original
content-type/CloudEvents headers, and the context headers of :mod:`metalake.kafka.dlq` plus ``connector`` and
``origin``. With ``none`` the record raises :class:`TaskFailed`; the caller marks the connector FAILED with the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from opentelemetry import metrics

from control.connectors.reasons import safe_reason
from control.connectors.store import Tolerance
from metalake.events.envelope import Headers
from metalake.kafka.dlq import DeadLetter, dead_letter_headers


class Counter(Protocol):
    """The part of an OpenTelemetry counter the runtime uses (a fake in tests)."""

    def add(self, amount: int, attributes: dict[str, str] | None = None) -> None: ...


def _default_counter() -> Counter:
    # The API's proxy meter binds to whatever provider configure_telemetry installs later.
    return metrics.get_meter("metalake.connectors").create_counter(
        "metalake.connectors.dlq", unit="{record}", description="Records sent to the connectors dead-letter topic"
    )


class TaskFailed(RuntimeError):
    """A record failed under ``errors.tolerance=none``: the connector stops (FAILED) with this message."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


@dataclass(frozen=True)
class DeadLetterRecord:
    """One record for the DLQ topic: ``value`` is the original bytes, ``headers`` original plus context."""

    key: bytes
    value: bytes | None
    headers: Headers
    stage: str


class ErrorPolicy:
    """Applies one connector's tolerance. Holds only immutable context; counting happens after Kafka confirmed."""

    def __init__(
        self, tolerance: Tolerance, *, tenant: str, connector: str, plugin: str, counter: Counter | None = None
    ) -> None:
        self.tolerance = tolerance
        self.tenant, self.connector, self.plugin = tenant, connector, plugin
        self._counter = counter if counter is not None else _default_counter()

    def dead_letter(
        self,
        exc: BaseException,
        *,
        stage: str,
        value: bytes | None,
        original_headers: Sequence[tuple[str, bytes]] = (),
        origin: str,
    ) -> DeadLetterRecord:
        """The dead letter for a failed record, or :class:`TaskFailed` (chained to ``exc``) under ``none``."""
        reason = safe_reason(exc)
        if self.tolerance is Tolerance.NONE:
            raise TaskFailed(f"{stage}: {type(exc).__name__}: {reason}", stage) from exc
        context = dead_letter_headers(
            DeadLetter(
                reason=reason,
                error_class=type(exc).__name__,
                stage=stage,
                tenant_id=self.tenant,
                plugin=self.plugin,
            )
        )
        headers: Headers = [
            *original_headers,
            *context,
            ("connector", self.connector.encode()),
            ("origin", origin.encode()),
        ]
        return DeadLetterRecord(f"{self.tenant}:{self.connector}".encode(), value, headers, stage)

    def count(self, records: Sequence[DeadLetterRecord]) -> None:
        """Count dead letters once Kafka confirmed them (labels: tenant, plugin, stage; never payload data)."""
        for record in records:
            self._counter.add(1, {"tenant": self.tenant, "plugin": self.plugin, "stage": record.stage})
