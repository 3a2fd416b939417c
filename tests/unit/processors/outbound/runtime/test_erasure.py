"""A GDPR erase reaching outbound (``io.metalake.asset.erased.v1``): the ledger forgets the anchors that name the
erased URN in clear (its children too when the erase took them), other assets' stay; signed webhooks that subscribed
to ``asset.erased`` get the announcement without the URN, others do not."""

from __future__ import annotations

import hashlib
import json
from typing import Any

from pydantic import SecretStr

from catalog.changes import Change
from control.subscriptions.filters import Filters
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.webhook.destination import WebhookDestination, body_of
from processors.outbound.runtime.destination import DestinationEnv
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.erasure import erased_urn_matcher, forget_erased
from processors.outbound.runtime.ledger import DELIVERIES, Ledger
from processors.outbound.runtime.loops import Outbound
from processors.outbound.runtime.retry import RetryPolicy
from processors.propagation.erasure import erased_event
from tenants.naming import CHANGES_TOPIC
from tests._support.outbound_helpers import as_change, completed_event

TABLE = "urn:metalake:postgres:prod/shop/public/customers"
OTHER = "urn:metalake:postgres:prod/shop/public/orders"


ERASURE_ID = "6f1c2a9e-8d4b-4c1e-9a57-3b2d1e0f4a6c"


def _erased(urn: str, children: bool) -> Change:
    # As the erase publishes it (processors.lake.erase).
    return Change.of(erased_event("acme", ERASURE_ID, hashlib.sha256(urn.encode()).hexdigest(), children))


def test_the_matcher_takes_the_urn_and_with_children_what_lies_under_it() -> None:
    alone = erased_urn_matcher(_erased(TABLE, children=False))
    tree = erased_urn_matcher(_erased(TABLE, children=True))
    assert alone is not None and tree is not None
    assert alone(TABLE) and not alone(f"{TABLE}/email") and not alone(OTHER)
    assert tree(TABLE) and tree(f"{TABLE}/email") and not tree(OTHER) and not tree(f"{TABLE}_old/email")


class _Anchors:
    """The ledger collection's two calls an erase makes, over documents in memory."""

    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def find(self, query: dict[str, Any], projection: dict[str, int]) -> list[dict[str, Any]]:
        kinds = query["kind"]["$in"]
        return [d for d in self.docs if d["tenant"] == query["tenant"] and d["kind"] in kinds]

    def delete_many(self, query: dict[str, Any]) -> Any:
        ids = set(query["_id"]["$in"])
        before = len(self.docs)
        self.docs[:] = [d for d in self.docs if d["_id"] not in ids]
        return type("Deleted", (), {"deleted_count": before - len(self.docs)})()


def test_the_ledger_forgets_the_erased_assets_anchors_and_keeps_the_others() -> None:
    docs = [
        {"_id": "a1", "kind": "anchor", "tenant": "acme", "asset": f"{TABLE}/email"},
        {"_id": "a2", "kind": "shared", "tenant": "acme", "asset": TABLE},
        {"_id": "a3", "kind": "anchor", "tenant": "acme", "asset": OTHER},
        {"_id": "a4", "kind": "anchor", "tenant": "globex", "asset": TABLE},
    ]
    anchors = _Anchors(docs)
    ledger = Ledger({DELIVERIES: anchors})  # type: ignore[arg-type]
    assert forget_erased(ledger, _erased(TABLE, children=True)) == 2
    assert [d["_id"] for d in anchors.docs] == ["a3", "a4"]
    # Any other change forgets nothing.
    other = as_change(completed_event("acme", TABLE, "PII", [f"{TABLE}/email"]))
    assert forget_erased(ledger, other) == 0 and len(anchors.docs) == 2


def _hook(**filters: Any) -> Subscription:
    secrets = {"key_id": "k1", "secret": SecretStr("whsec_c2VjcmV0LXNpZ25pbmcta2V5LWZvci10ZXN0cw==")}
    return Subscription(
        "acme", "hook", "webhook", {"url": "https://hooks.example/in"}, Filters(**filters), secrets=secrets
    )


def test_webhooks_get_the_erase_only_when_they_subscribed_to_it_and_never_the_urn() -> None:
    webhook = WebhookDestination(DestinationEnv(Settings(), AddressGuard()))
    change = _erased(TABLE, children=True)
    assert change.kind == "asset.erased"
    assert not webhook.accepts(change, _hook())
    opted_in = _hook(event_types=("asset.erased",))
    assert opted_in.filters.matches(change) and webhook.accepts(change, opted_in)
    body = json.loads(body_of(change, opted_in, "delivery-1"))
    assert body["type"] == "asset.erased" and body["change"]["asset"] is None
    assert body["change"]["data"] == {
        "erasure_id": ERASURE_ID,
        "urn_sha256": hashlib.sha256(TABLE.encode()).hexdigest(),
        "include_children": True,
    }
    assert "customers" not in json.dumps(body)


class _Record:
    def __init__(self, change: Change) -> None:
        event = erased_event("acme", ERASURE_ID, str(change.data["urn_sha256"]), True)
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


class _NoSubscriptions:
    def for_tenant(self, tenant: str) -> list[Subscription]:
        return []


def test_the_runtime_forgets_as_the_erase_reaches_it() -> None:
    anchors = _Anchors([{"_id": "a1", "kind": "anchor", "tenant": "acme", "asset": f"{TABLE}/email"}])
    ledger = Ledger({DELIVERIES: anchors})  # type: ignore[arg-type]
    dispatcher = Dispatcher(_NoSubscriptions(), {}, ledger, RetryPolicy(1, 0.1, 0.1, 1, 1, 1, 3))  # type: ignore[arg-type]
    runtime = Outbound(Settings(), dispatcher, producer=None, tester=None)  # type: ignore[arg-type]
    try:
        runtime.handle_batch([_Record(_erased(TABLE, children=True))])  # type: ignore[list-item]
    finally:
        runtime.close()
    assert anchors.docs == []
