"""A batch's deliveries run in parallel per asset, not per record key: ``metalake.changes`` is keyed by tenant, and
grouping by the key alone would deliver a whole tenant's changes one after another. A batch that fails ends only
after all its groups have."""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from pymongo.errors import AutoReconnect

from catalog.changes import StateChange
from control.subscriptions.store import Subscription
from metalake.kafka import Delivery, RawRecord
from ops.settings import Settings
from processors.outbound.runtime.destination import DeliveryResult
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.loops import Outbound
from processors.outbound.runtime.retry import RetryPolicy
from tenants.naming import CHANGES_TOPIC

SUB = Subscription("acme", "hook", "gate", {})


class _Message:
    def __init__(self, event: Any) -> None:
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


class _Subscriptions:
    def get(self, tenant: str, name: str) -> Subscription | None:
        return SUB

    def for_tenant(self, tenant: str) -> list[Subscription]:
        return [SUB]


class _Gate:
    """Every delivery waits for the other one: they complete only if they run at the same time."""

    order = 0

    def __init__(self) -> None:
        self.barrier = threading.Barrier(2, timeout=5)
        self.delivered: list[str] = []

    def accepts(self, change: Any, subscription: Subscription) -> bool:
        return True

    def deliver(self, change: Any, subscription: Subscription, ledger: Any) -> DeliveryResult:
        self.barrier.wait()
        self.delivered.append(change.subject)
        return DeliveryResult("delivered")


class _Ledger:
    def scope(self, tenant: str, subscription: str, change_id: str) -> None:
        return None


class _Producer:
    def publish_raw(self, records: Sequence[RawRecord]) -> list[Delivery]:
        assert not records, [dict(r.headers) for r in records]
        return []


def _change(urn: str) -> _Message:
    change = StateChange(
        id=f"id-{urn}",
        source="/tests",
        tenant="acme",
        table="classifications",
        key={"urn": urn, "tag": "PII"},
        deleted=False,
        version=1,
        event_id=f"ev-{urn}",
        state={"source": "human", "propagate": True},
    )
    return _Message(change.event())


def test_two_assets_of_one_tenant_are_delivered_in_parallel() -> None:
    gate = _Gate()
    policy = RetryPolicy(1, 0.1, 0.1, 1, 1, 1, 3)
    dispatcher = Dispatcher(_Subscriptions(), {"gate": gate}, _Ledger(), policy, sleep=lambda _: None)  # type: ignore[arg-type,dict-item]
    runtime = Outbound(Settings(), dispatcher, _Producer(), tester=None)  # type: ignore[arg-type]
    try:
        a, b = "urn:metalake:postgres:prod/shop/public/a/email", "urn:metalake:postgres:prod/shop/public/b/email"
        messages = [_change(a), _change(b)]
        assert messages[0].key() == messages[1].key() == b"acme"
        runtime.handle_batch(messages)  # type: ignore[arg-type]
    finally:
        runtime.close()
    assert sorted(gate.delivered) == [a, b]


class _OneUnreachable:
    """Asset ``a``'s delivery finds MongoDB gone at once; the other one is still delivering then."""

    order = 0

    def __init__(self, unreachable: str) -> None:
        self.unreachable = unreachable
        self.delivered: list[str] = []

    def accepts(self, change: Any, subscription: Subscription) -> bool:
        return True

    def deliver(self, change: Any, subscription: Subscription, ledger: Any) -> DeliveryResult:
        if change.subject == self.unreachable:
            raise AutoReconnect("127.0.0.1:27017: connection closed")
        time.sleep(0.5)
        self.delivered.append(change.subject)
        return DeliveryResult("delivered")


def test_a_failed_batch_ends_after_every_group_so_a_rerun_never_overlaps_one() -> None:
    a, b = "urn:metalake:postgres:prod/shop/public/a/email", "urn:metalake:postgres:prod/shop/public/b/email"
    destination = _OneUnreachable(a)
    policy = RetryPolicy(1, 0.1, 0.1, 1, 1, 1, 3)
    dispatcher = Dispatcher(_Subscriptions(), {"gate": destination}, _Ledger(), policy, sleep=lambda _: None)  # type: ignore[arg-type,dict-item]
    runtime = Outbound(Settings(), dispatcher, _Producer(), tester=None)  # type: ignore[arg-type]
    try:
        with pytest.raises(AutoReconnect):
            runtime.handle_batch([_change(a), _change(b)])  # type: ignore[list-item]
        # Raised only once b's delivery had ended, not when a's failed.
        assert destination.delivered == [b]
    finally:
        runtime.close()
