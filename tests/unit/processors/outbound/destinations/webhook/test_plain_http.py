"""A webhook URL is https (plain http only to a loopback test receiver the runtime allowlists): a plain-http URL stored
before the rule (the store does not validate) fails permanently with the rule in words, without a connection."""

from __future__ import annotations

import pytest
from pydantic import SecretStr

from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.webhook.destination import WebhookDestination
from processors.outbound.runtime.destination import DestinationEnv, PermanentDelivery
from tests._support.outbound_helpers import WEBHOOK_SECRET, as_change, classification_event

URN = "urn:metalake:postgres:prod/shop/public/customers/email"


def test_a_stored_plain_http_webhook_is_a_permanent_failure_in_words() -> None:
    webhook = WebhookDestination(DestinationEnv(Settings(), AddressGuard()))
    secrets = {"key_id": SecretStr("k1"), "secret": SecretStr(WEBHOOK_SECRET)}
    stored = Subscription("acme", "hook", "webhook", {"url": "http://hooks.example/in?token=abc"}, secrets=secrets)
    change = as_change(classification_event("acme", URN, "PII"))
    with pytest.raises(PermanentDelivery, match="must be https") as refused:
        webhook.deliver(change, stored, None)  # type: ignore[arg-type]
    assert "token=abc" not in str(refused.value)
