"""Signed webhooks: the change as JSON, signed with the subscription's key(s), POSTed to a guarded address.

A Monte Carlo incident's change also carries ``impact`` (the asset's owners and the assets downstream of it by
lineage, bounded by ``outbound.impact_max_*``), read from the catalog when the body is built, so a receiver needs no
second call; other changes' bodies are as before.

A GDPR erase (``asset.erased``) reaches subscriptions whose ``event_types`` name it (the filters already matched it:
a glob or the kind itself), with the erase's data only: ``erasure_id``, ``include_children`` and ``urn_sha256`` (a
keyed hash where the platform has a key-encryption key), never the URN (docs/outbound.md, "GDPR erase")."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import ValidationError

from catalog.changes import ASSET_ERASED, Change
from control.subscriptions.destinations import DestinationSpec
from control.subscriptions.store import Subscription
from metalake.net.ssrf import RefusedAddress
from processors.outbound.destinations.common import incident_of
from processors.outbound.destinations.webhook.signing import SigningKey, sign
from processors.outbound.destinations.webhook.spec import WebhookConfig, WebhookSpec
from processors.outbound.runtime.destination import (
    DeliveryResult,
    Destination,
    PermanentDelivery,
    RetryableDelivery,
)
from processors.outbound.runtime.ledger import LedgerScope, Step
from processors.outbound.runtime.pinned_http import post
from processors.outbound.runtime.retry import parse_retry_after

if TYPE_CHECKING:
    from processors.outbound.runtime.catalog import Impact

_RETRYABLE = frozenset({408, 425, 429, 500, 502, 503, 504})


def impact_of(impact: Impact) -> dict[str, Any]:
    """The ``impact`` member of an incident's body: ``downstream`` breadth-first by lineage, ``truncated`` when more
    lies beyond the walk's bounds (then ``downstream_count`` is a lower bound)."""
    return {
        "owners": list(impact.owners),
        "downstream_count": len(impact.downstream),
        "downstream": list(impact.downstream),
        "truncated": impact.truncated,
    }


def _erase_data(change: Change) -> dict[str, Any]:
    # Only what the erase announces about itself, whatever else a later version of the event carries.
    return {k: change.data.get(k) for k in ("erasure_id", "urn_sha256", "include_children")}


def body_of(change: Change, subscription: Subscription, delivery_id: str, impact: Impact | None = None) -> bytes:
    """The signed JSON body; ``impact`` (an incident's reach, ``None``: not read) is added for incident changes."""
    payload: dict[str, Any] = {
        "id": delivery_id,
        "type": change.kind,
        "tenant": change.tenant,
        "subscription": subscription.name,
        "change": {
            "id": change.id,
            "type": change.type,
            "subject": change.subject,
            "time": change.time,
            "asset": change.asset,
            "tag": change.tag,
            "data": _erase_data(change) if change.type == ASSET_ERASED else change.data,
        },
    }
    if incident_of(change) is not None:
        payload["impact"] = impact_of(impact) if impact is not None else None
    return json.dumps(payload, separators=(",", ":"), sort_keys=True, ensure_ascii=False).encode()


def signing_keys(subscription: Subscription) -> list[SigningKey]:
    keys = []
    for id_field, secret_field in (("key_id", "secret"), ("previous_key_id", "previous_secret")):
        key_id, secret = subscription.secret(id_field), subscription.secret(secret_field)
        if key_id and secret:
            keys.append(SigningKey(key_id, secret))
    return keys


class WebhookDestination(Destination):
    spec: ClassVar[type[DestinationSpec]] = WebhookSpec
    order: ClassVar[int] = 30

    def accepts(self, change: Change, subscription: Subscription) -> bool:
        # A GDPR erase's announcement only to receivers that asked for it by name (``asset.erased`` or a glob in
        # ``event_types``): its body is a kind receivers did not have to handle before. It names no URN.
        if change.type == ASSET_ERASED:
            return bool(subscription.filters.event_types)
        return True

    def deliver(self, change: Change, subscription: Subscription, ledger: LedgerScope) -> DeliveryResult:
        try:
            config: WebhookConfig = self.config(subscription)
        except ValidationError as exc:
            # Stored before a rule tightened (a plain-http URL): the rule's words, never the value.
            raise PermanentDelivery(f"webhook url refused: {exc.errors()[0]['msg']}") from None
        keys = signing_keys(subscription)
        if not keys:
            raise PermanentDelivery("webhook subscription has no signing key")
        delivery_id = ledger.key("post")

        def send(prior: Step | None) -> Mapping[str, str]:
            # An interrupted earlier attempt (prior in flight) is simply resent: receivers deduplicate on the
            # webhook-id / Idempotency-Key, which is the same on every attempt.
            incident, reader = incident_of(change), self.env.catalog
            impact = reader.impact(change.tenant, incident.asset) if incident is not None and reader else None
            body = body_of(change, subscription, delivery_id, impact)
            headers = {
                "Content-Type": "application/json",
                "User-Agent": "metalake-outbound/1",
                **sign(keys, delivery_id, int(time.time()), body),
            }
            try:
                answer = post(
                    str(config.url),
                    body,
                    headers,
                    guard=self.env.guard,
                    timeout_s=self.env.settings.outbound.http_timeout_s,
                )
            except RefusedAddress as exc:
                raise PermanentDelivery(f"webhook refused: {exc}") from None
            except OSError as exc:
                raise RetryableDelivery(f"webhook unreachable: {type(exc).__name__}") from None
            if 200 <= answer.status < 300:
                return {"status": str(answer.status)}
            if answer.status in _RETRYABLE:
                raise RetryableDelivery(
                    f"webhook answered {answer.status}", parse_retry_after(answer.headers.get("retry-after"))
                )
            raise PermanentDelivery(f"webhook answered {answer.status}")

        result = ledger.once("post", send)
        return DeliveryResult("delivered", f"webhook {result.get('status', '')}".strip(), {"id": delivery_id})
