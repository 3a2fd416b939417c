"""The runtime's reader of the tenants' subscriptions (``control.subscriptions.store``): a TTL cache of each
tenant's active ones, so a delivery does not read MongoDB and an edit reaches the runtime within
``outbound.subscriptions_ttl_s``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from control.subscriptions.store import Subscription, SubscriptionStore
from metalake.cache import TtlCache


class SubscriptionCache:
    """Each tenant's active subscriptions, reloaded after ``ttl_s``: changes reach the runtime within the TTL."""

    def __init__(self, store: SubscriptionStore, ttl_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        self._cache: TtlCache[str, list[Subscription]] = TtlCache(ttl_s, clock=clock)

    def for_tenant(self, tenant: str) -> list[Subscription]:
        return self._cache.get(tenant, lambda: self._store.active(tenant))

    def get(self, tenant: str, name: str) -> Subscription | None:
        return next((s for s in self.for_tenant(tenant) if s.name == name), None)
