"""Retry scheduling: short in-process backoff with Retry-After, the retry topic's delays, retry records, and the
dispatcher handing over to the retry topic or the DLQ."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, ClassVar

import pytest

from catalog.changes import STATE_CHANGED, Change
from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from processors.outbound.destinations.webhook.spec import WebhookSpec
from processors.outbound.runtime.destination import DeliveryResult, Destination, PermanentDelivery, RetryableDelivery
from processors.outbound.runtime.dispatch import Breaker, Dispatcher
from processors.outbound.runtime.retry import RetryInfo, RetryPolicy, parse_retry_after, read_retry_info, retry_headers

POLICY = RetryPolicy.from_settings(
    OutboundSettings(
        short_attempts=3,
        backoff_initial_s=0.5,
        backoff_max_s=1.5,
        retry_after_max_s=10,
        retry_initial_s=5,
        retry_max_s=60,
        retry_topic_max_attempts=4,
    )
)


def test_short_delays_back_off_and_honour_retry_after() -> None:
    assert [POLICY.short_delay(n, None) for n in (1, 2, 3)] == [0.5, 1.0, None]
    assert POLICY.short_delay(1, 7.0) == 7.0
    assert POLICY.short_delay(1, 30.0) is None  # too long to block the process: the retry topic waits instead
    tight = RetryPolicy(5, 1.0, 1.5, 10, 5, 60, 4)
    assert tight.short_delay(3, None) == 1.5


def test_topic_delays_grow_cap_and_end_in_the_dlq() -> None:
    assert [POLICY.topic_delay(n, None) for n in (1, 2, 3, 4, 5)] == [5, 10, 20, 40, 60]
    assert POLICY.topic_delay(1, 120.0) == 120.0
    assert not POLICY.exhausted(4) and POLICY.exhausted(5)


def test_retry_after_forms() -> None:
    assert parse_retry_after("3") == 3.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412470.0) == 10.0
    assert parse_retry_after("soon") is None and parse_retry_after(None) is None


def test_retry_headers_round_trip_and_replace_earlier_ones() -> None:
    original = [("ce_id", b"c1"), ("outbound.attempt", b"1")]
    headers = retry_headers(original, RetryInfo("slack", 2, 1234), "slack answered 500 " * 40)
    assert read_retry_info(headers) == RetryInfo("slack", 2, 1234)
    assert [k for k, _ in headers].count("outbound.attempt") == 1
    assert len(dict(headers)["outbound.reason"]) == 300
    assert read_retry_info([("ce_id", b"c1")]) is None


class _Config(DestinationConfig):
    pass


class _ScriptedSpec(DestinationSpec):
    name: ClassVar[str] = "scripted"
    config_model: ClassVar[type[DestinationConfig]] = _Config
    secrets_model: ClassVar[type[DestinationSecrets]] = DestinationSecrets
    implementation: ClassVar[str] = f"{__name__}:_Scripted"


class _Scripted(Destination):
    spec: ClassVar[type[DestinationSpec]] = _ScriptedSpec

    def __init__(self, script: list[Exception | None]) -> None:
        self.script = script
        self.calls = 0

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        return True

    def deliver(self, change: Change, subscription: Subscription, ledger: Any) -> DeliveryResult:
        step = self.script[self.calls]
        self.calls += 1
        if step is not None:
            raise step
        return DeliveryResult("delivered")


class _Ledger:
    def scope(self, tenant: str, subscription: str, change_id: str) -> None:
        return None


def _dispatch(
    script: list[Exception | None], breaker: Breaker | None = None
) -> tuple[Dispatcher, _Scripted, list[float]]:
    slept: list[float] = []
    destination = _Scripted(script)
    dispatcher = Dispatcher(
        None,  # type: ignore[arg-type]
        {"scripted": destination},
        _Ledger(),  # type: ignore[arg-type]
        POLICY,
        sleep=slept.append,
        breaker=breaker,
    )
    return dispatcher, destination, slept


SUB = Subscription("acme", "s", "scripted", {})
CHANGE = Change("c1", STATE_CHANGED, "acme", {"table": "classifications"})


def test_dispatcher_retries_in_process_then_delivers() -> None:
    dispatcher, destination, slept = _dispatch([RetryableDelivery("500"), RetryableDelivery("429", 2.0), None])
    assert dispatcher.deliver(CHANGE, SUB, 3).status == "delivered"
    assert destination.calls == 3 and slept == [0.5, 2.0]


def test_dispatcher_hands_over_to_the_retry_topic() -> None:
    dispatcher, _, slept = _dispatch([RetryableDelivery("500")] * 3)
    outcome = dispatcher.deliver(CHANGE, SUB, 3)
    assert (outcome.status, outcome.reason, slept) == ("retry", "500", [0.5, 1.0])
    dispatcher, _, slept = _dispatch([RetryableDelivery("429", 45.0)])
    outcome = dispatcher.deliver(CHANGE, SUB, 3)
    assert (outcome.status, outcome.retry_after_s, slept) == ("retry", 45.0, [])


def test_dispatcher_dead_letters_permanent_failures_at_once() -> None:
    dispatcher, destination, _ = _dispatch([PermanentDelivery("404 channel_not_found")])
    outcome = dispatcher.deliver(CHANGE, SUB, 3)
    assert (outcome.status, outcome.error_class, destination.calls) == ("dead", "PermanentDelivery", 1)


@pytest.mark.parametrize(
    ("stored", "update", "expected"),
    [
        ({}, {"key_id": "k1", "secret": "s1"}, {"key_id": "k1", "secret": "s1"}),
        (
            {"key_id": "k1", "secret": "s1"},
            {"key_id": "k2", "secret": "s2"},
            {"key_id": "k2", "secret": "s2", "previous_key_id": "k1", "previous_secret": "s1"},
        ),
        (
            {"key_id": "k2", "secret": "s2", "previous_key_id": "k1", "previous_secret": "s1"},
            {"key_id": "k2", "secret": "s2"},
            {"key_id": "k2", "secret": "s2"},
        ),
    ],
)
def test_webhook_rotation_merge(stored: Mapping[str, str], update: Mapping[str, str], expected: dict[str, str]) -> None:
    assert WebhookSpec.merge_secrets(stored, update) == expected


def test_a_destination_bug_dead_letters_that_delivery_only() -> None:
    dispatcher, destination, _ = _dispatch([KeyError("channel")])
    outcome = dispatcher.deliver(CHANGE, SUB, 3)
    assert (outcome.status, outcome.error_class, outcome.reason) == ("dead", "KeyError", "scripted failed: KeyError")
    assert destination.calls == 1


def test_breaker_sends_a_failing_subscription_straight_to_the_retry_topic_until_a_probe_succeeds() -> None:
    now = [100.0]
    dispatcher, destination, _ = _dispatch([RetryableDelivery("timeout")] * 3 + [None, None], Breaker(lambda: now[0]))
    assert dispatcher.deliver(CHANGE, SUB, 3).status == "retry"
    assert destination.calls == 3
    skipped = dispatcher.deliver(CHANGE, SUB, 3)
    assert (skipped.status, skipped.error_class, destination.calls) == ("retry", "BreakerOpen", 3)
    other = Subscription("other-tenant", "s", "scripted", {})
    assert dispatcher.deliver(Change("c9", STATE_CHANGED, "other-tenant", {}), other, 3).status == "delivered"
    assert dispatcher.deliver(CHANGE, SUB, 1, probe=True).status == "delivered"  # the retry loop's probe
    now[0] += 1
    assert dispatcher.breaker.is_open(("acme", "s")) is False


def test_breaker_reopens_for_the_cool_down_only() -> None:
    now = [0.0]
    breaker = Breaker(lambda: now[0])
    breaker.trip(("acme", "s"), 5.0)
    assert breaker.is_open(("acme", "s")) and not breaker.is_open(("acme", "t"))
    now[0] = 5.1
    assert not breaker.is_open(("acme", "s"))


def test_subscriptions_get_only_changes_from_after_their_creation() -> None:
    created = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)

    class _Cache:
        def for_tenant(self, tenant: str) -> list[Subscription]:
            # Naive, as a pymongo client without tz_aware hands it out.
            return [Subscription("acme", "s", "scripted", {}, created_at=created.replace(tzinfo=None))]

    dispatcher, _, _ = _dispatch([])
    dispatcher.subscriptions = _Cache()  # type: ignore[assignment]

    def at(time: str | None) -> Change:
        return Change("c1", STATE_CHANGED, "acme", {"table": "classifications"}, time=time)

    assert dispatcher.targets(at("2026-11-22T02:59:59.999Z")) == []
    assert [s.name for s in dispatcher.targets(at("2026-11-22T03:00:00.001Z"))] == ["s"]
    assert [s.name for s in dispatcher.targets(at(None))] == ["s"]  # no time: delivered
