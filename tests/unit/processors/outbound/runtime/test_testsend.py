"""The runtime's side of a test send: only a pending test is delivered, once, and its outcome recorded."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, ClassVar

from catalog.changes import Change
from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec
from control.subscriptions.store import Subscription
from control.subscriptions.testsend import SubscriptionTest, TestOutcome
from processors.outbound.runtime.destination import DeliveryResult, Destination, PermanentDelivery
from processors.outbound.runtime.testsend import SubscriptionTester

NOW = datetime(2026, 11, 26, 12, 0, tzinfo=UTC)


class _Spec(DestinationSpec):
    name: ClassVar[str] = "fake"
    config_model: ClassVar[type[DestinationConfig]] = DestinationConfig
    secrets_model: ClassVar[type[DestinationSecrets]] = DestinationSecrets
    implementation: ClassVar[str] = f"{__name__}:_Fake"


class _Fake(Destination):
    spec: ClassVar[type[DestinationSpec]] = _Spec

    def __init__(self, failure: Exception | None = None) -> None:
        self.failure = failure
        self.sent: list[tuple[Change, Subscription]] = []

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        return False  # a test send must not ask: filters and accepts() are for changes

    def deliver(self, change: Change, subscription: Subscription, ledger: Any) -> DeliveryResult:
        self.sent.append((change, subscription))
        if self.failure is not None:
            raise self.failure
        return DeliveryResult("delivered", "fake", {"ts": "1"})


class _Store:
    def __init__(self, *subs: Subscription) -> None:
        self.subs = {(s.tenant, s.name): s for s in subs}

    def get(self, tenant: str, name: str) -> Subscription | None:
        return self.subs.get((tenant, name))

    def with_secrets(self, sub: Subscription) -> Subscription:
        return sub


class _Ledger:
    def __init__(self) -> None:
        self.scopes: list[tuple[str, str, str]] = []

    def scope(self, tenant: str, subscription: str, change_id: str) -> None:
        self.scopes.append((tenant, subscription, change_id))


class _Outcomes:
    def __init__(self) -> None:
        self.docs: dict[tuple[str, str], TestOutcome] = {}

    def pending(self, test: SubscriptionTest) -> None:
        self.docs[(test.tenant, test.id)] = TestOutcome(test.id, test.tenant, test.subscription, "pending")

    def get(self, tenant: str, test_id: str) -> TestOutcome | None:
        return self.docs.get((tenant, test_id))

    def finish(self, tenant: str, test_id: str, status: Any, detail: str, refs: Mapping[str, str] | None) -> bool:
        known = self.docs[(tenant, test_id)]
        self.docs[(tenant, test_id)] = TestOutcome(known.id, tenant, known.subscription, status, detail, refs or {})
        return True


def _tester(destination: _Fake, *subs: Subscription) -> tuple[SubscriptionTester, _Outcomes, _Ledger]:
    outcomes, ledger = _Outcomes(), _Ledger()
    tester = SubscriptionTester(
        _Store(*subs),  # type: ignore[arg-type]
        {"fake": destination},
        ledger,  # type: ignore[arg-type]
        outcomes,  # type: ignore[arg-type]
        expiry_s=300,
        clock=lambda: NOW.timestamp(),
    )
    return tester, outcomes, ledger


SUB = Subscription("acme", "alerts", "fake", {}, enabled=False)


def _test(**fields: Any) -> SubscriptionTest:
    values: dict[str, Any] = {"tenant": "acme", "subscription": "alerts", "tag": "PII", "actor": "a", "time": NOW}
    return SubscriptionTest(**{**values, **fields})


def test_a_pending_test_is_delivered_to_its_subscription_even_disabled_and_recorded() -> None:
    destination = _Fake()
    tester, outcomes, ledger = _tester(destination, SUB)
    test = _test()
    outcomes.pending(test)
    tester.handle(test)
    [(change, sub)] = destination.sent
    assert sub is SUB and change.id == f"test-{test.id}"
    assert ledger.scopes == [("acme", "alerts", f"test-{test.id}")]
    outcome = outcomes.get("acme", test.id)
    assert outcome is not None and (outcome.status, outcome.detail, dict(outcome.refs)) == (
        "delivered",
        "fake",
        {"ts": "1"},
    )


def test_a_known_outcome_or_an_unrecorded_test_sends_nothing() -> None:
    destination = _Fake()
    tester, outcomes, _ = _tester(destination, SUB)
    tester.handle(_test())  # never recorded by the API (a replayed topic)
    done = _test()
    outcomes.pending(done)
    tester.handle(done)
    tester.handle(done)  # redelivered after its outcome was recorded
    assert len(destination.sent) == 1


def test_failures_are_the_outcome() -> None:
    destination = _Fake(PermanentDelivery("slack answered 404 channel_not_found"))
    tester, outcomes, _ = _tester(destination, SUB)
    failing, missing, late = _test(), _test(subscription="gone"), _test(time=NOW - timedelta(seconds=301))
    for test in (failing, missing, late):
        outcomes.pending(test)
        tester.handle(test)
    statuses = {t.id: (o.status, o.detail) for t in (failing, missing, late) if (o := outcomes.get("acme", t.id))}
    assert statuses[failing.id] == ("failed", "slack answered 404 channel_not_found")
    assert statuses[missing.id] == ("failed", "no such subscription")
    assert statuses[late.id][0] == "failed" and statuses[late.id][1].startswith("expired")
    assert len(destination.sent) == 1


def test_a_destination_bug_is_reported_by_class_only() -> None:
    destination = _Fake(KeyError("xoxb-secret"))
    tester, outcomes, _ = _tester(destination, SUB)
    test = _test()
    outcomes.pending(test)
    tester.handle(test)
    outcome = outcomes.get("acme", test.id)
    assert outcome is not None and (outcome.status, outcome.detail) == ("failed", "fake failed: KeyError")
