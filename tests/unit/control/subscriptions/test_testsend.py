"""A subscription's test send: the request record round-trips, and the change it delivers is a valid state change."""

from __future__ import annotations

import pytest

from control.subscriptions.testsend import TEST_ASSET, SubscriptionTest, decode_subscription_test
from metalake.events.envelope import InvalidEvent
from metalake.events.validation import InvalidData


def test_the_request_round_trips_through_its_record() -> None:
    test = SubscriptionTest(tenant="acme", subscription="pii-alerts", tag="PII", actor="admin-client")
    event = test.event()
    assert event.key == b"acme:pii-alerts"
    decoded = decode_subscription_test(event.key, event.value(), event.headers())
    assert decoded == test


def test_a_record_of_another_type_is_refused() -> None:
    test = SubscriptionTest(tenant="acme", subscription="pii-alerts", tag="PII", actor="a")
    change = test.change()
    assert change.state_change is not None
    record = change.state_change.event()
    with pytest.raises(InvalidEvent):
        decode_subscription_test(record.key, record.value(), record.headers())


def test_the_change_is_a_tag_added_to_the_test_asset() -> None:
    test = SubscriptionTest(tenant="acme", subscription="pii-alerts", tag="GDPR", actor="jdoe")
    change = test.change()
    assert (change.kind, change.asset, change.tag, change.tenant) == (
        "classification.added",
        TEST_ASSET,
        "GDPR",
        "acme",
    )
    assert change.id == f"test-{test.id}" and change.state["actor"] == "jdoe"


def test_a_tag_no_change_could_carry_is_refused() -> None:
    test = SubscriptionTest(tenant="acme", subscription="pii-alerts", tag="not a tag", actor="a")
    with pytest.raises(InvalidData):
        test.event()
    with pytest.raises(InvalidData):
        test.change()
