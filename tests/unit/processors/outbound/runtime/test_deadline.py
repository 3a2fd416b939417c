"""Every delivery has a wall-clock deadline (``outbound.delivery_deadline_s``), whatever its destination: a receiver
that answers one byte a second (each read well within the socket timeout) is cut at the deadline and the change goes
to the retry topic, and another tenant's change in the same batch is delivered meanwhile, not after."""

from __future__ import annotations

import time
from collections.abc import Iterator, Sequence
from typing import Any

import pytest
from pydantic import SecretStr

from catalog.changes import Change, decode_change
from control.subscriptions.store import Subscription
from metalake.kafka import Delivery, RawRecord
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.freshdesk.destination import FreshdeskDestination
from processors.outbound.destinations.jira.destination import JiraDestination
from processors.outbound.destinations.slack.destination import SlackDestination
from processors.outbound.destinations.teams.destination import TeamsDestination
from processors.outbound.destinations.webhook.destination import WebhookDestination
from processors.outbound.runtime.destination import Destination, DestinationEnv
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.loops import RETRY_TOPIC, Outbound
from processors.outbound.runtime.retry import RetryPolicy
from tenants.naming import CHANGES_TOPIC
from tests._support.memory_ledger import MemoryLedger
from tests._support.outbound_helpers import WEBHOOK_SECRET, classification_event, outbound_settings
from tests._support.trickle_server import TrickleServer
from tests._support.webhook_server import WebhookServer

URN = "urn:metalake:postgres:prod/shop/public/customers/email"
DEADLINE_S = 2.0
# The socket timeout is far above the trickle's one byte a second: only the deadline can end the delivery.
SETTINGS = outbound_settings(Settings(), http_timeout_s=5.0, delivery_deadline_s=DEADLINE_S)
KINDS: dict[str, type[Destination]] = {
    "webhook": WebhookDestination,
    "slack": SlackDestination,
    "jira": JiraDestination,
    "teams": TeamsDestination,
    "freshdesk": FreshdeskDestination,
}


def _subscription(tenant: str, kind: str, url: str) -> Subscription:
    config: dict[str, Any]
    secrets: dict[str, str]
    if kind == "webhook":
        config, secrets = {"url": f"{url}/hook"}, {"key_id": "k1", "secret": WEBHOOK_SECRET}
    elif kind == "slack":
        config, secrets = {"channel": "C0123", "base_url": f"{url}/api/"}, {"token": "xoxb-test"}
    elif kind == "jira":
        config, secrets = {"server": url, "email": "bot@example.com", "project": "GOV"}, {"api_token": "t"}
    elif kind == "teams":
        config, secrets = {}, {"webhook_url": f"{url}/workflows/invoke?sig=abc"}
    else:
        config, secrets = {"domain": "acme", "base_url": url, "email": "dpo@example.com"}, {"api_key": "k"}
    return Subscription(tenant, kind, kind, config, secrets={k: SecretStr(v) for k, v in secrets.items()})


class _Subscriptions:
    def __init__(self, subs: Sequence[Subscription]) -> None:
        self._subs = subs

    def for_tenant(self, tenant: str) -> list[Subscription]:
        return [s for s in self._subs if s.tenant == tenant]

    def get(self, tenant: str, name: str) -> Subscription | None:
        return next((s for s in self.for_tenant(tenant) if s.name == name), None)


def _dispatcher(subs: Sequence[Subscription]) -> Dispatcher:
    env = DestinationEnv(SETTINGS, AddressGuard.from_settings(SETTINGS.outbound.ssrf_allow))
    destinations = {name: cls(env) for name, cls in KINDS.items()}
    policy = RetryPolicy.from_settings(SETTINGS.outbound)
    return Dispatcher(_Subscriptions(subs), destinations, MemoryLedger(), policy)  # type: ignore[arg-type]


@pytest.fixture
def trickle() -> Iterator[TrickleServer]:
    server = TrickleServer(interval=1.0).start()
    yield server
    server.stop()


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_trickling_receiver_is_cut_at_the_deadline(trickle: TrickleServer, kind: str) -> None:
    sub = _subscription("acme", kind, trickle.url)
    dispatcher = _dispatcher([sub])
    change = _change("acme")
    assert dispatcher.targets(change) == [sub]
    started = time.monotonic()
    outcome = dispatcher.deliver(change, sub, SETTINGS.outbound.short_attempts)
    took = time.monotonic() - started
    assert trickle.requests, "the receiver was reached"
    assert (outcome.status, outcome.error_class) == ("retry", "DeliveryDeadline"), outcome
    assert DEADLINE_S - 0.1 <= took < DEADLINE_S + 1.0


class _Message:
    def __init__(self, tenant: str) -> None:
        event = classification_event(tenant, URN, "PII")
        self._key, self._value, self._headers = event.key, event.value(), event.headers()

    def topic(self) -> str:
        return CHANGES_TOPIC

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 0

    def key(self) -> bytes:
        return self._key

    def value(self) -> bytes:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers


def _change(tenant: str) -> Change:
    msg = _Message(tenant)
    return decode_change(msg.key(), msg.value(), msg.headers())


class _Producer:
    def __init__(self) -> None:
        self.records: list[RawRecord] = []

    def publish_raw(self, records: Sequence[RawRecord]) -> list[Delivery]:
        self.records += records
        return []


def test_another_tenants_delivery_in_the_batch_is_not_held(trickle: TrickleServer) -> None:
    receiver = WebhookServer(WEBHOOK_SECRET).start()
    try:
        slow, fast = _subscription("slowco", "webhook", trickle.url), _subscription("acme", "webhook", receiver.url)
        producer = _Producer()
        runtime = Outbound(SETTINGS, _dispatcher([slow, fast]), producer, tester=None)  # type: ignore[arg-type]
        started = time.time()
        try:
            runtime.handle_batch([_Message("slowco"), _Message("acme")])  # type: ignore[list-item]
        finally:
            runtime.close()
        took = time.time() - started
        delivered = receiver.seen("/hook")
        assert len(delivered) == 1 and delivered[0].at - started < 1.0, "acme's change waited for slowco's receiver"
        # The batch (and so its offset commit) ends at the slow delivery's deadline, which went to the retry topic.
        assert took < DEADLINE_S + 1.0
        assert [(r.topic, dict(r.headers)["outbound.subscription"]) for r in producer.records] == [
            (RETRY_TOPIC, b"webhook")
        ]
    finally:
        receiver.stop()
