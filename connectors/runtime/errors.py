"""Error tolerance like Kafka Connect's ``errors.tolerance=none|all``, and the dead letters it produces.

With ``all``, a record that fails a transform, validation or the plugin's mapping becomes a dead letter for the
connectors DLQ topic (``tenants.naming.dlq_topic("connectors")``), built by
:func:`metalake.kafka.dlq.dead_letter_record`: the original bytes as the value, the original content-type/CloudEvents
headers, and the kernel's context headers with the connector worker's own (``connector``, ``origin``). With ``none``
the record raises :class:`TaskFailed`; the caller marks the connector FAILED with the error.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from opentelemetry import metrics

from control.connectors.reasons import safe_reason
from control.connectors.store import Tolerance
from metalake.kafka import RawRecord
from metalake.kafka.dlq import DeadLetter, dead_letter_record, read_dead_letter
from tenants.naming import dlq_topic

DLQ_TOPIC = dlq_topic("connectors")


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
    ) -> RawRecord:
        """The dead letter for a failed record, or :class:`TaskFailed` (chained to ``exc``) under ``none``."""
        reason = safe_reason(exc)
        if self.tolerance is Tolerance.NONE:
            raise TaskFailed(f"{stage}: {type(exc).__name__}: {reason}", stage) from exc
        letter = DeadLetter(
            reason=reason,
            error_class=type(exc).__name__,
            stage=stage,
            tenant_id=self.tenant,
            plugin=self.plugin,
            connector=self.connector,
            origin=origin,
        )
        # The key groups a connector's dead letters in one partition; the id only labels the publish result.
        key = f"{self.tenant}:{self.connector}"
        return dead_letter_record(DLQ_TOPIC, f"dlq:{origin}", key.encode(), value, original_headers, letter)

    def count(self, records: Sequence[RawRecord]) -> None:
        """Count dead letters once Kafka confirmed them (labels: tenant, plugin, stage; never payload data)."""
        for record in records:
            letter = read_dead_letter(record.headers)
            stage = letter.stage if letter is not None else "unknown"
            self._counter.add(1, {"tenant": self.tenant, "plugin": self.plugin, "stage": stage})
