"""Microsoft Teams: one Adaptive Card per change, POSTed to the subscription's Workflows or incoming-webhook URL.

The URL is the credential (sealed like Slack's token) and is tenant-chosen, so the POST goes through the SSRF guard
and the pinned connection webhooks use (:mod:`processors.outbound.runtime.pinned_http`): resolved once, connected to
the checked address, no redirects followed. Neither kind of URL lets a sender update or thread a message it posted
(they answer without a message id), so every change is its own card. Neither takes an idempotency key either: the
ledger's ``post`` step makes a redelivered change post nothing; an attempt that died between Teams accepting the card
and the ledger recording it is resent (at least once in that window, see docs/outbound.md).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import ClassVar

from catalog.changes import Change
from control.subscriptions.destinations import DestinationSpec
from control.subscriptions.store import Subscription
from metalake.net.ssrf import RefusedAddress
from processors.outbound.destinations.common import INCIDENT_KIND, incident_of, worth_telling
from processors.outbound.destinations.teams.messages import teams_message
from processors.outbound.destinations.teams.spec import TeamsConfig, TeamsSpec
from processors.outbound.runtime.destination import (
    DeliveryResult,
    Destination,
    PermanentDelivery,
    RetryableDelivery,
)
from processors.outbound.runtime.ledger import LedgerScope, Step
from processors.outbound.runtime.pinned_http import HttpAnswer, post
from processors.outbound.runtime.retry import parse_retry_after

DEFAULT_KINDS = frozenset({"classification.added", "classification.removed", "propagation.completed"})
_RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})
# Office 365 connector URLs answer 200 with this text when Teams refused the message behind them (throttling too).
_CONNECTOR_FAILURE = b"Webhook message delivery failed"


def classify(answer: HttpAnswer) -> None:
    """Raise unless ``answer`` says the card was accepted (Workflows: 202; incoming webhooks: 200 ``1``)."""
    status = answer.status
    if 200 <= status < 300:
        if answer.body.lstrip().startswith(_CONNECTOR_FAILURE):
            if b"429" in answer.body:
                raise RetryableDelivery("teams throttled the connector (429)", 1.0)
            raise PermanentDelivery("teams refused the message")
        return
    if status in _RETRYABLE:
        raise RetryableDelivery(f"teams answered {status}", parse_retry_after(answer.headers.get("retry-after")))
    # 3xx (never followed), 400 (a card Teams does not take), 401/403/404 (a revoked or deleted workflow).
    raise PermanentDelivery(f"teams answered {status}")


class TeamsDestination(Destination):
    spec: ClassVar[type[DestinationSpec]] = TeamsSpec
    order: ClassVar[int] = 40

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        if change.kind == INCIDENT_KIND:
            config: TeamsConfig = self.config(subscription)
            return config.incidents and incident_of(change) is not None
        if change.tag is None or change.asset is None or not worth_telling(change):
            return False
        # Per-asset propagated rows would post one card per downstream asset: only when asked for by name.
        return change.kind in DEFAULT_KINDS or bool(subscription.filters.event_types)

    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult:
        config: TeamsConfig = self.config(subscription)
        url = subscription.secret("webhook_url")
        if not url:
            raise PermanentDelivery("teams subscription has no webhook_url")
        catalog = str(config.catalog_url) if config.catalog_url else None

        def send(prior: Step | None) -> Mapping[str, str]:
            # Read only when the card is really sent: a redelivery whose step is done costs no catalog reads.
            incident, reader = incident_of(change), self.env.catalog
            impact = reader.impact(change.tenant, incident.asset) if incident is not None and reader else None
            message = teams_message(change, catalog, impact)
            body = json.dumps(message, separators=(",", ":"), ensure_ascii=False).encode()
            try:
                answer = post(
                    url,
                    body,
                    {"Content-Type": "application/json", "User-Agent": "metalake-outbound/1"},
                    guard=self.env.guard,
                    timeout_s=self.env.settings.outbound.http_timeout_s,
                )
            except RefusedAddress as exc:
                raise PermanentDelivery(f"teams webhook refused: {exc}") from None
            except OSError as exc:
                raise RetryableDelivery(f"teams unreachable: {type(exc).__name__}") from None
            classify(answer)
            return {"status": str(answer.status)}

        result = ledger.once("post", send)
        return DeliveryResult("delivered", f"teams {result.get('status', '')}".strip())
