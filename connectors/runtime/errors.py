"""Error tolerance like Kafka Connect's ``errors.tolerance=none|all``, and the dead letters it produces.

With ``all``, a record that fails a transform, validation or the plugin's mapping becomes a dead letter for the
connectors DLQ topic (``tenants.naming.dlq_topic("connectors")``), built by
:func:`metalake.kafka.dlq.dead_letter_record`: the original bytes as the value, the original content-type/CloudEvents
headers, and the kernel's context headers with the connector worker's own (``connector``, ``origin``). With ``none``
the record raises :class:`TaskFailed`; the caller marks the connector FAILED with the error.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

from opentelemetry import metrics

from control.connectors.reasons import safe_reason
from control.connectors.records import Tolerance
from metalake.kafka import RawRecord
from metalake.kafka.dlq import DeadLetter, dead_letter_record, read_dead_letter
from metalake.telemetry.metrics import EVENTS
from tenants.naming import dlq_topic

DLQ_TOPIC = dlq_topic("connectors")

log = logging.getLogger(__name__)


class Counter(Protocol):
    """The part of an OpenTelemetry counter the runtime uses (a fake in tests)."""

    def add(self, amount: int, attributes: dict[str, str] | None = None) -> None: ...


class _DeadLettered:
    """Dead letters in ``metalake_events_total`` (source: the plugin, reason: the stage that failed)."""

    def add(self, amount: int, attributes: dict[str, str] | None = None) -> None:
        labels = attributes or {}
        EVENTS.add(
            amount,
            {
                "source": labels.get("plugin", "unknown"),
                "outcome": "dead_lettered",
                "reason": labels.get("stage", "unknown"),
            },
        )


def _default_counter() -> Counter:
    return _DeadLettered()


def _default_dropped_counter() -> Counter:
    return metrics.get_meter("metalake.connectors").create_counter(
        "metalake.connectors.dlq.dropped",
        unit="{record}",
        description="Dead letters dropped because their connector reached connect.dead_letter_cap",
    )


_PRUNE_ABOVE = 10_000


class DeadLetterBudget:
    """How many dead letters each connector may still publish: ``cap`` per fixed window of ``window_s`` seconds.

    One captured webhook delivery verifies in many variants (Monte Carlo signs a re-encoding of the parsed body), and
    a source can fail every record; without a cap either fills the DLQ topic. Counted per worker process (each of N
    workers admits up to ``cap``), under one lock; an entry is one small tuple per connector that dead-lettered.
    """

    def __init__(self, cap: int, window_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap, self.window_s = cap, window_s
        self._clock = clock
        self._lock = threading.Lock()
        self._used: dict[tuple[str, str], tuple[float, int]] = {}
        self._pruned_at = clock()

    def take(self, tenant: str, connector: str, wanted: int) -> int:
        """How many of ``wanted`` dead letters ``connector`` may publish now (they are counted as used)."""
        now = self._clock()
        with self._lock:
            started, used = self._used.get((tenant, connector), (now, 0))
            if now - started >= self.window_s:
                started, used = now, 0
            granted = max(0, min(wanted, self.cap - used))
            self._used[(tenant, connector)] = (started, used + granted)
            # Forget connectors whose window is over, at most once a window: the scan stays off the common path.
            if len(self._used) > _PRUNE_ABOVE and now - self._pruned_at >= self.window_s:
                self._used = {k: v for k, v in self._used.items() if now - v[0] < self.window_s}
                self._pruned_at = now
        return granted


def _field(exc: BaseException) -> str | None:
    """The field an error names (``InvalidPayload``, ``TransformError``, ``InvalidEvent`` carry one), else None."""
    field = getattr(exc, "field", None)
    return field[:200] if isinstance(field, str) and field else None


class TaskFailed(RuntimeError):
    """A record failed under ``errors.tolerance=none``: the connector stops (FAILED) with this message."""

    def __init__(self, message: str, stage: str) -> None:
        super().__init__(message)
        self.stage = stage


class ErrorPolicy:
    """Applies one connector's tolerance. Holds only immutable context; counting happens after Kafka confirmed."""

    def __init__(  # noqa: PLR0913
        self,
        tolerance: Tolerance,
        *,
        tenant: str,
        connector: str,
        plugin: str,
        counter: Counter | None = None,
        budget: DeadLetterBudget | None = None,
        dropped_counter: Counter | None = None,
    ) -> None:
        self.tolerance = tolerance
        self.tenant, self.connector, self.plugin = tenant, connector, plugin
        self._counter = counter if counter is not None else _default_counter()
        self._budget = budget
        self._dropped = dropped_counter if dropped_counter is not None else _default_dropped_counter()

    def admit(self, letters: Sequence[RawRecord]) -> list[RawRecord]:
        """The dead letters within the connector's cap (``connect.dead_letter_cap``); the others are counted
        (``metalake.connectors.dlq.dropped``), logged and dropped."""
        if self._budget is None or not letters:
            return list(letters)
        granted = self._budget.take(self.tenant, self.connector, len(letters))
        dropped = len(letters) - granted
        if dropped:
            self._dropped.add(dropped, {"plugin": self.plugin})  # the tenant is in the log line, not a label
            log.warning(
                "connect.dead_letters_dropped",
                extra={
                    "connector": self.connector,
                    "plugin": self.plugin,
                    "dropped": dropped,
                    "cap": self._budget.cap,
                    "window_s": self._budget.window_s,
                },
            )
        return list(letters[:granted])

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
            field=_field(exc),
        )
        # The key groups a connector's dead letters in one partition; the id only labels the publish result.
        key = f"{self.tenant}:{self.connector}"
        return dead_letter_record(DLQ_TOPIC, f"dlq:{origin}", key.encode(), value, original_headers, letter)

    def count(self, records: Sequence[RawRecord]) -> None:
        """Count dead letters once Kafka confirmed them (labels: plugin, stage; never a tenant or payload data: the
        dead letter's headers name the tenant)."""
        for record in records:
            letter = read_dead_letter(record.headers)
            stage = letter.stage if letter is not None else "unknown"
            self._counter.add(1, {"plugin": self.plugin, "stage": stage})
