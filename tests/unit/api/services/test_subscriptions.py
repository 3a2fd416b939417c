"""The subscription service's rules: destinations by spec, secrets merged as the destination merges them (values
never in a problem), and waiting for a test send's outcome."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest
from pydantic import SecretStr

from api.problems import Problem
from api.services import subscriptions
from control.subscriptions.destinations import DestinationConfig, DestinationSecrets, DestinationSpec
from control.subscriptions.testsend import TestOutcome, TestOutcomes


class ChatConfig(DestinationConfig):
    channel: str


class ChatSecrets(DestinationSecrets):
    token: SecretStr
    key_id: str | None = None


class Chat(DestinationSpec):
    name = "chat"
    config_model = ChatConfig
    secrets_model = ChatSecrets
    implementation = "nowhere:Chat"


SPECS: dict[str, type[DestinationSpec]] = {"chat": Chat}


class Outcomes:
    """TestOutcomes.get answering ``pending`` for the first ``pending_reads`` reads, then ``delivered``."""

    def __init__(self, pending_reads: int) -> None:
        self.reads = 0
        self.pending_reads = pending_reads

    def get(self, tenant: str, test_id: str) -> TestOutcome | None:
        self.reads += 1
        if self.reads <= self.pending_reads:
            return TestOutcome(test_id, tenant, "alerts", "pending", requested_at=datetime.now(UTC))
        return TestOutcome(test_id, tenant, "alerts", "delivered", requested_at=datetime.now(UTC))


def _outcomes(fake: Outcomes) -> TestOutcomes:
    return cast(TestOutcomes, cast(Any, fake))


def test_an_unknown_destination_names_the_installed_ones() -> None:
    with pytest.raises(Problem) as refused:
        subscriptions.spec(SPECS, "pager")
    assert (refused.value.status, refused.value.field, refused.value.detail) == (
        422,
        "destination",
        "destination: one of chat",
    )


def test_secrets_merge_into_the_stored_ones_and_a_null_is_no_value() -> None:
    merged = subscriptions.merged_secrets(
        Chat, {"token": "old", "key_id": "k1"}, {"token": SecretStr("new"), "key_id": None}
    )
    assert merged == {"token": "new", "key_id": "k1"}


def test_an_invalid_secret_is_named_by_its_path_and_never_quoted() -> None:
    with pytest.raises(Problem) as refused:
        subscriptions.merged_secrets(Chat, {}, {"tokn": SecretStr("xoxb-very-secret")})
    assert refused.value.status == 422
    assert refused.value.slug == "invalid-secrets"
    assert refused.value.field is not None and refused.value.field.startswith("secrets/")
    assert "xoxb-very-secret" not in refused.value.detail


def test_the_wait_ends_with_the_outcome_or_gives_up_after_its_time() -> None:
    delivered = subscriptions.wait(_outcomes(Outcomes(pending_reads=2)), "acme", "t1", wait_s=5)
    assert delivered is not None and delivered.status == "delivered"
    assert subscriptions.wait(_outcomes(Outcomes(pending_reads=10**6)), "acme", "t1", wait_s=0.1) is None


def test_a_test_of_another_subscription_is_404() -> None:
    fake = _outcomes(Outcomes(pending_reads=0))
    assert subscriptions.find_test(fake, "acme", "alerts", "t1").id == "t1"
    with pytest.raises(Problem) as missing:
        subscriptions.find_test(fake, "acme", "other", "t1")
    assert (missing.value.status, missing.value.field) == (404, "test_id")
