"""The ``outbound.deliver`` span: one per change and subscription, a child of the context the change's record
carries (``ce_traceparent``: the event's trace, through the stream job's projection), so a delivery shows in the
trace of the event that caused it; a retry-topic attempt keeps the record's headers, hence the same trace."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from catalog.changes import Change
from control.subscriptions.store import Subscription
from metalake.telemetry.propagation import extract_context
from processors.outbound.runtime.dispatch import Outcome

tracer = trace.get_tracer(__name__)


def traced_delivery(
    deliver: Callable[[], Outcome],
    headers: Sequence[tuple[str, bytes]],
    change: Change,
    sub: Subscription,
    attempt: int,
) -> Outcome:
    attributes: dict[str, str | int] = {
        "metalake.tenant": change.tenant,
        "metalake.change_id": change.id,
        "metalake.change_kind": change.kind,
        "metalake.subscription": sub.name,
        "metalake.destination": sub.destination,
        "metalake.attempt": attempt,
    }
    with tracer.start_as_current_span(
        "outbound.deliver", context=extract_context(headers), kind=trace.SpanKind.CONSUMER, attributes=attributes
    ) as span:
        outcome = deliver()
        span.set_attribute("metalake.outcome", outcome.status)
        if outcome.status in ("retry", "dead"):
            span.set_status(Status(StatusCode.ERROR, outcome.error_class or outcome.status))
        return outcome
