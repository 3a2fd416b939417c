"""The runtime's subscription cache: one control-plane read per tenant per TTL."""

from __future__ import annotations

from control.subscriptions.store import Subscription
from processors.outbound.runtime.subscriptions import SubscriptionCache


class _Store:
    def __init__(self) -> None:
        self.reads: list[str] = []
        self.subs = {"acme": [Subscription("acme", "a", "slack", {})]}

    def active(self, tenant: str) -> list[Subscription]:
        self.reads.append(tenant)
        return list(self.subs.get(tenant, []))


def test_reads_once_per_tenant_per_ttl_and_sees_changes_after_it() -> None:
    store, now = _Store(), [0.0]
    cache = SubscriptionCache(store, 10.0, clock=lambda: now[0])  # type: ignore[arg-type]
    assert [s.name for s in cache.for_tenant("acme")] == ["a"]
    assert cache.for_tenant("acme") and cache.for_tenant("other") == []
    assert store.reads == ["acme", "other"]
    store.subs["acme"].append(Subscription("acme", "b", "jira", {}))
    now[0] = 9.9
    assert cache.get("acme", "b") is None
    now[0] = 10.0
    assert cache.get("acme", "b") is not None and store.reads == ["acme", "other", "acme"]
