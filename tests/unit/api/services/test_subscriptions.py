"""The subscription service's rules: destinations by spec, secrets merged as the destination merges them (values
never in a problem), and waiting for a test send's outcome."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, cast

import pytest
from pydantic import SecretStr

from api.problems import Problem
from api.services import subscriptions
from control.subscriptions.destinations import (
    DestinationConfig,
    DestinationSecrets,
    DestinationSpec,
)
from control.subscriptions.store import Subscription, SubscriptionStore
from control.subscriptions.testsend import TestOutcome, TestOutcomes
from processors.outbound.destinations.jira.spec import JiraSpec
from processors.outbound.destinations.slack.spec import SlackSpec
from processors.outbound.destinations.webhook.spec import WebhookSpec


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


class Store:
    """The part of SubscriptionStore that update uses, in memory."""

    def __init__(self, destination: str, config: dict[str, Any], secrets: dict[str, str]) -> None:
        self.sub = Subscription("acme", "alerts", destination, config)
        self.secrets = secrets
        self.written: dict[str, str] | None = None

    def get(self, tenant: str, name: str) -> Subscription | None:
        return self.sub

    def stored_secrets(self, tenant: str, name: str) -> dict[str, str]:
        return dict(self.secrets)

    def update(self, tenant: str, name: str, **changes: Any) -> Subscription:
        self.written = changes["secrets"]
        return self.sub


def _update(store: Store, config: dict[str, Any], secrets: dict[str, SecretStr | None] | None) -> None:
    subscriptions.update(
        cast(SubscriptionStore, cast(Any, store)),
        DESTINATIONS,
        "acme",
        "alerts",
        config=config,
        secrets=secrets,
        filters=None,
        enabled=None,
    )


DESTINATIONS: dict[str, type[DestinationSpec]] = {"webhook": WebhookSpec, "slack": SlackSpec, "jira": JiraSpec}
HOOK = {"url": "https://hooks.example/in"}
MOVES = [
    ("webhook", HOOK, {"url": "https://attacker.example/in"}, {"key_id": "k1", "secret": "s3cret-stored-0123456"}),
    (
        "slack",
        {"channel": "alerts"},
        {"channel": "alerts", "base_url": "https://attacker.example"},
        {"token": "xoxb-s3cret"},
    ),
    (
        "jira",
        {"server": "https://acme.atlassian.net", "email": "ops@acme.test", "project": "OPS"},
        {"server": "https://attacker.example", "email": "ops@acme.test", "project": "OPS"},
        {"api_token": "s3cret-token"},
    ),
]


@pytest.mark.parametrize(("destination", "before", "after", "stored"), MOVES)
def test_moving_a_destination_requires_its_secrets_again(
    destination: str, before: dict[str, Any], after: dict[str, Any], stored: dict[str, str]
) -> None:
    # The class of attack: a write-only secret kept across a change of endpoint is handed to the new host.
    spec = DESTINATIONS[destination]
    store = Store(destination, spec.config(before).model_dump(mode="json"), stored)
    for secrets in (None, {}):
        with pytest.raises(Problem) as refused:
            _update(store, after, secrets)
        assert refused.value.status == 422 and refused.value.slug == "secrets-required"
        assert refused.value.field is not None and refused.value.field.startswith("secrets/")
        assert "s3cret" not in refused.value.detail
    assert store.written is None
    fresh = {k: SecretStr(v.replace("s3cret", "fresh1")) for k, v in stored.items()}
    _update(store, after, dict(fresh))
    assert store.written == {k: v.get_secret_value() for k, v in fresh.items()}
    # The same endpoint keeps the stored secrets.
    store.written = None
    _update(store, before, {})
    assert store.written == stored


def test_a_moved_webhook_does_not_keep_its_previous_key() -> None:
    stored = {"key_id": "k1", "secret": "s3cret-stored-0123456"}
    store = Store("webhook", WebhookSpec.config(HOOK).model_dump(mode="json"), stored)
    _update(
        store,
        {"url": "https://new.example/in"},
        {"key_id": SecretStr("k2"), "secret": SecretStr("fresh-secret-0123456")},
    )
    assert store.written == {"key_id": "k2", "secret": "fresh-secret-0123456"}


def test_a_plain_http_webhook_url_is_refused_unless_it_is_a_loopback_receiver() -> None:
    with pytest.raises(Problem) as refused:
        subscriptions._config(WebhookSpec, {"url": "http://hooks.example/in?token=abc"})
    assert (refused.value.status, refused.value.field) == (422, "config/url")
    assert "must be https" in refused.value.detail
    assert subscriptions._config(WebhookSpec, {"url": "http://127.0.0.1:8099/in"})["url"].startswith("http://127.")
