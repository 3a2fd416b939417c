"""Test sends (``metalake.outbound.tests``): a tenant admin's test message, delivered to its one subscription.

The admin API recorded the test as pending and published the request (:mod:`control.subscriptions.testsend`); here
the runtime delivers the request's change to that subscription once (enabled or not, filters not applied, no retries:
the person asking wants the destination's answer, not a delivery eventually) and records the outcome. Only a pending
test is sent: a redelivered or replayed request whose outcome is known, or one the API never recorded, sends nothing;
one older than ``outbound.test_expiry_s`` (the runtime was down) is reported failed instead of sent late. Side
effects go through the ledger under the test's change id, so a redelivery after a crash does not post twice.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping

from pymongo.errors import PyMongoError

from control.subscriptions.store import SubscriptionStore
from control.subscriptions.testsend import Status, SubscriptionTest, TestOutcomes
from metalake.events.validation import InvalidData
from metalake.net.deadline import network_deadline
from metalake.sealing import SealingError
from processors.outbound.runtime.destination import DeliveryError, Destination
from processors.outbound.runtime.ledger import Ledger

log = logging.getLogger(__name__)


class SubscriptionTester:
    def __init__(  # noqa: PLR0913
        self,
        store: SubscriptionStore,
        destinations: Mapping[str, Destination],
        ledger: Ledger,
        outcomes: TestOutcomes,
        expiry_s: float,
        clock: Callable[[], float] = time.time,
        deadline_s: float = 30.0,
    ) -> None:
        self.store, self.destinations, self.ledger, self.outcomes = store, destinations, ledger, outcomes
        self._expiry_s, self._clock, self._deadline_s = expiry_s, clock, deadline_s

    def handle(self, test: SubscriptionTest) -> None:
        """Deliver ``test`` if it is pending and record the outcome. A MongoDB failure propagates (redelivery)."""
        known = self.outcomes.get(test.tenant, test.id)
        if known is None or known.status != "pending":
            log.info("outbound.test_skipped", extra={"tenant": test.tenant, "test_id": test.id})
            return
        if self._clock() - test.time.timestamp() > self._expiry_s:
            self._finish(test, "failed", "expired: the outbound runtime did not pick the test up in time")
            return
        status, detail, refs = self._send(test)
        self._finish(test, status, detail, refs)

    def _send(self, test: SubscriptionTest) -> tuple[Status, str, Mapping[str, str]]:
        sub = self.store.get(test.tenant, test.subscription)
        if sub is None:
            return "failed", "no such subscription", {}
        destination = self.destinations.get(sub.destination)
        if destination is None:
            return "failed", f"destination {sub.destination!r} is not available in the outbound runtime", {}
        try:
            change = test.change()
        except InvalidData:
            return "failed", "the test's tag is not a tag name", {}
        ledger = self.ledger.scope(test.tenant, sub.name, change.id)
        try:
            # The runtime's delivery deadline: a trickling receiver does not hold the batch with the test in it.
            with network_deadline(self._deadline_s) as limit:
                result = destination.deliver(change, self.store.with_secrets(sub), ledger)
        except SealingError:
            return "failed", "the subscription's secrets cannot be opened with the runtime's key-encryption key", {}
        except PyMongoError:
            raise
        except Exception as exc:  # noqa: BLE001 - a destination's bug is this test's answer, not the runtime's end
            if limit.expired:
                return "failed", f"no answer within the delivery deadline ({self._deadline_s:g} s)", {}
            if isinstance(exc, DeliveryError):
                return "failed", str(exc), {}
            return "failed", f"{sub.destination} failed: {type(exc).__name__}", {}
        return result.status, result.detail, result.refs

    def _finish(
        self, test: SubscriptionTest, status: Status, detail: str, refs: Mapping[str, str] | None = None
    ) -> None:
        self.outcomes.finish(test.tenant, test.id, status, detail, refs)
        log.info(
            "outbound.test_sent",
            extra={"tenant": test.tenant, "subscription": test.subscription, "status": status, "detail": detail},
        )
