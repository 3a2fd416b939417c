"""Deliver one change to one subscription, with short in-process retries; pick the subscriptions a change reaches."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pymongo.errors import PyMongoError

from catalog.changes import Change
from control.subscriptions.store import Subscription
from metalake.net.deadline import Deadline, network_deadline
from metalake.telemetry.metrics import DELIVERIES, DELIVERY
from processors.outbound.runtime.destination import Destination, PermanentDelivery, RetryableDelivery
from processors.outbound.runtime.ledger import Ledger, LedgerScope
from processors.outbound.runtime.retry import RetryPolicy
from processors.outbound.runtime.subscriptions import SubscriptionCache

log = logging.getLogger(__name__)
# metalake_deliveries_total's outcome for a delivery's final status here (destination: the subscription's kind, one
# of the installed destinations: the API validates it); "skipped" (nothing to send) is no delivery.
# A parked change counts as dead_lettered where its dead letter is made (loops).
_COUNTED = {"delivered": "delivered", "retry": "retried", "dead": "failed"}


@dataclass(frozen=True)
class Outcome:
    subscription: Subscription
    status: Literal["delivered", "skipped", "retry", "dead"]
    reason: str = ""
    error_class: str = ""
    retry_after_s: float | None = None


def _aware(value: datetime) -> datetime:
    # pymongo hands out naive UTC datetimes unless the client was made with tz_aware=True.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class Breaker:
    """Per (tenant, subscription): open for a while after a delivery ended retryable, so the next changes skip the
    in-process attempts and go straight to the retry topic. A destination that hangs until the timeout then costs
    one worker one timeout per cool-down instead of one per change (and other tenants' changes are not queued
    behind it). The retry loop's attempts are the probes that close it again."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._open_until: dict[tuple[str, str], float] = {}
        self._lock = threading.Lock()

    def is_open(self, key: tuple[str, str]) -> bool:
        with self._lock:
            return self._open_until.get(key, 0.0) > self._clock()

    def trip(self, key: tuple[str, str], for_s: float) -> None:
        with self._lock:
            self._open_until[key] = self._clock() + for_s

    def reset(self, key: tuple[str, str]) -> None:
        with self._lock:
            self._open_until.pop(key, None)


class Dispatcher:
    def __init__(  # noqa: PLR0913
        self,
        subscriptions: SubscriptionCache,
        destinations: Mapping[str, Destination],
        ledger: Ledger,
        policy: RetryPolicy,
        sleep: Callable[[float], None] = time.sleep,
        breaker: Breaker | None = None,
        asset_tags: Callable[[str, str], Collection[str]] | None = None,
    ) -> None:
        self.subscriptions, self.destinations, self.ledger, self.policy = subscriptions, destinations, ledger, policy
        self._sleep = sleep
        self.breaker = breaker or Breaker()
        # (tenant, urn) -> the asset's tags now, for subscriptions filtering on them; without it they get nothing.
        self._asset_tags = asset_tags

    def targets(self, change: Change) -> list[Subscription]:
        """The tenant's enabled subscriptions whose filters and destination accept ``change``, Jira before Slack.

        A subscription only gets changes that happened after it was created: a first start of the runtime (a new
        consumer group reads the retained topic from the beginning) must not replay history into Slack and Jira.
        """
        out = []
        happened = change.happened_at
        carried: Collection[str] | None = None  # read once per change, only if a subscription asks
        for sub in self.subscriptions.for_tenant(change.tenant):
            destination = self.destinations.get(sub.destination)
            if destination is None or not sub.filters.matches(change):
                continue
            if happened is not None and sub.created_at is not None and happened < _aware(sub.created_at):
                continue
            if sub.filters.asset_tags:
                if carried is None:
                    lookup, asset = self._asset_tags, change.asset
                    carried = lookup(change.tenant, asset) if lookup is not None and asset is not None else ()
                if not sub.filters.wants_asset_tags(carried):
                    continue
            try:
                if destination.accepts(change, sub):
                    out.append(sub)
            except Exception:  # noqa: BLE001 - e.g. a stored config the destination no longer accepts: skip it
                log.warning(
                    "outbound.accepts_failed",
                    extra={"tenant": change.tenant, "subscription": sub.name, "destination": sub.destination},
                )
        return sorted(out, key=lambda s: (self.destinations[s.destination].order, s.name))

    def deliver(self, change: Change, sub: Subscription, attempts: int, *, probe: bool = False) -> Outcome:
        """Up to ``attempts`` tries (backoff, Retry-After honoured); then ``retry`` or ``dead``. While the
        subscription's breaker is open only a ``probe`` (a retry-topic attempt) calls the destination."""
        key = (change.tenant, sub.name)
        if not probe and self.breaker.is_open(key):
            outcome = Outcome(sub, "retry", "destination failing recently (breaker open)", "BreakerOpen")
        else:
            outcome = self._deliver(change, sub, attempts)
            if outcome.status == "retry":
                self.breaker.trip(key, max(self.policy.retry_initial_s, outcome.retry_after_s or 0.0))
            elif outcome.status in ("delivered", "skipped"):
                self.breaker.reset(key)
        counted = _COUNTED.get(outcome.status)
        if counted is not None:
            DELIVERIES.add(1, {"destination": sub.destination, "outcome": counted})
        return outcome

    def _deliver(self, change: Change, sub: Subscription, attempts: int) -> Outcome:
        destination = self.destinations.get(sub.destination)
        if destination is None:
            return Outcome(sub, "dead", f"unknown destination {sub.destination!r}", "UnknownDestination")
        ledger = self.ledger.scope(change.tenant, sub.name, change.id)
        # One wall-clock bound for the whole delivery, whatever the destination's SDK: a receiver trickling its answer
        # is cut there and the change goes to the retry topic instead of holding the batch (and other tenants).
        with network_deadline(self.policy.deadline_s) as limit:
            failed = 0
            while True:
                tried = self._attempt(destination, change, sub, ledger, limit, failed + 1)
                if isinstance(tried, Outcome):
                    return tried
                failed += 1
                delay = self.policy.short_delay(failed, tried.retry_after_s) if failed < attempts else None
                if delay is None or delay >= limit.remaining():
                    return Outcome(sub, "retry", str(tried), type(tried).__name__, tried.retry_after_s)
                self._sleep(delay)

    def _attempt(
        self, destination: Destination, change: Change, sub: Subscription, ledger: LedgerScope, limit: Deadline, n: int
    ) -> Outcome | RetryableDelivery:
        """One call of the destination: its final outcome, or the retryable failure to back off from."""
        started = time.monotonic()
        try:
            try:
                result = destination.deliver(change, sub, ledger)
            finally:
                DELIVERY.record(time.monotonic() - started, {"destination": sub.destination})
        except PyMongoError:
            raise  # MongoDB (the ledger) unreachable: the batch fails; the loop waits for MongoDB and runs it again
        except Exception as exc:  # noqa: BLE001 - a destination's bug or bad stored config must not stop the others
            if limit.expired:
                # Whatever the cut connection raised (a reset, a short read), the delivery is retried later.
                reason = f"{sub.destination} delivery cut at its deadline ({limit.seconds:g} s)"
                self._log("outbound.delivery_deadline", change, sub, started, reason, n)
                return Outcome(sub, "retry", reason, "DeliveryDeadline")
            if isinstance(exc, RetryableDelivery):
                self._log("outbound.delivery_failed", change, sub, started, str(exc), n)
                return exc
            reason = (
                str(exc) if isinstance(exc, PermanentDelivery) else f"{sub.destination} failed: {type(exc).__name__}"
            )
            self._log("outbound.delivery_dead", change, sub, started, reason, n)
            return Outcome(sub, "dead", reason, type(exc).__name__)
        self._log("outbound.delivered", change, sub, started, result.detail, n)
        return Outcome(sub, result.status, result.detail)

    @staticmethod
    def _log(message: str, change: Change, sub: Subscription, started: float, detail: str, attempt: int) -> None:
        log.info(
            message,
            extra={
                "tenant": change.tenant,
                "subscription": sub.name,
                "destination": sub.destination,
                "change_id": change.id,
                "kind": change.kind,
                "attempt": attempt,
                "detail": detail,
                "duration_ms": round((time.monotonic() - started) * 1000, 1),
            },
        )
