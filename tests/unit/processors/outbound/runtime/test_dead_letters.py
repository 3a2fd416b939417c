"""The outbound runtime's dead letters: the kernel's record (``metalake.kafka.dlq``) with the outbound context."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import pytest

from catalog.changes import PROPAGATION_COMPLETED
from control.subscriptions.store import Subscription
from metalake.events import new_event
from metalake.kafka import Delivery, RawRecord
from metalake.telemetry.exposition import install_meter_provider, render
from ops.settings import Settings
from processors.outbound.runtime.destination import PermanentDelivery
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.loops import DLQ_TOPIC, RETRY_TOPIC, Outbound
from processors.outbound.runtime.retry import RetryInfo, RetryPolicy, retry_headers
from tenants.naming import CHANGES_TOPIC
from tests._support.scrape import sample

URN = "urn:metalake:postgres:prod/shop/public/orders"
SUB = Subscription("acme", "hook", "scripted", {})


class _Message:
    def __init__(self, topic: str, key: bytes | None, value: bytes | None, headers: list[tuple[str, bytes]]) -> None:
        self._topic, self._key, self._value, self._headers = topic, key, value, headers

    def topic(self) -> str:
        return self._topic

    def partition(self) -> int:
        return 0

    def offset(self) -> int:
        return 41

    def key(self) -> bytes | None:
        return self._key

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, bytes]]:
        return self._headers


class _Subscriptions:
    def get(self, tenant: str, name: str) -> Subscription | None:
        return SUB if (tenant, name) == (SUB.tenant, SUB.name) else None

    def for_tenant(self, tenant: str) -> list[Subscription]:
        return [SUB] if tenant == SUB.tenant else []


class _Refusing:
    order = 0

    def accepts(self, change: Any, subscription: Subscription) -> bool:
        return True

    def deliver(self, change: Any, subscription: Subscription, ledger: Any) -> Any:
        raise PermanentDelivery("404 no such hook")


class _Ledger:
    def scope(self, tenant: str, subscription: str, change_id: str) -> None:
        return None


class _Producer:
    def __init__(self) -> None:
        self.sent: list[RawRecord] = []

    def publish_raw(self, records: Sequence[RawRecord]) -> list[Delivery]:
        self.sent.extend(records)
        return [Delivery(r.id, r.topic, 0, i) for i, r in enumerate(records)]


@pytest.fixture
def outbound() -> Iterator[tuple[Outbound, _Producer]]:
    policy = RetryPolicy(1, 0.1, 0.1, 1, 1, 1, 3)
    dispatcher = Dispatcher(_Subscriptions(), {"scripted": _Refusing()}, _Ledger(), policy, sleep=lambda _: None)  # type: ignore[arg-type,dict-item]
    producer = _Producer()
    runtime = Outbound(Settings(), dispatcher, producer, tester=None)  # type: ignore[arg-type]
    yield runtime, producer
    runtime.close()


def _change() -> tuple[bytes, bytes, list[tuple[str, bytes]], str]:
    data = {
        "urn": URN,
        "version": 7,
        "origin": URN,
        "tag": "PII",
        "added": [],
        "removed": [],
        "added_count": 0,
        "removed_count": 0,
        "reached": 0,
        "max_depth": 1,
        "truncated": False,
        "reason": None,
    }
    event = new_event(PROPAGATION_COMPLETED, "acme", data, source="/tests")
    return event.key, event.value(), event.headers(), event.id


def test_an_undecodable_change_is_dead_lettered_with_its_bytes_and_where_it_was(
    outbound: tuple[Outbound, _Producer],
) -> None:
    runtime, producer = outbound
    runtime.handle_batch([_Message(CHANGES_TOPIC, b"acme:x", b"{not json", [("ce_id", b"c1")])])  # type: ignore[list-item]
    [dead] = producer.sent
    assert (dead.topic, dead.id, dead.key, dead.value) == (DLQ_TOPIC, f"{CHANGES_TOPIC}:0:41", b"acme:x", b"{not json")
    headers = dead.headers
    assert headers[0] == ("ce_id", b"c1")
    assert [name for name, _ in headers[1:]] == [
        "error.class",
        "error.message",
        "stage",
        "origin.topic",
        "origin.partition",
        "origin.offset",
        "attempts",
    ]
    context = dict(headers)
    assert (context["error.class"], context["stage"], context["origin.topic"]) == (
        b"InvalidChange",
        b"outbound",
        CHANGES_TOPIC.encode(),
    )
    assert (context["origin.partition"], context["origin.offset"], context["attempts"]) == (b"0", b"41", b"1")


def test_a_failed_retry_is_dead_lettered_without_the_retry_headers(outbound: tuple[Outbound, _Producer]) -> None:
    runtime, producer = outbound
    key, value, original, change_id = _change()
    headers = retry_headers(original, RetryInfo(SUB.name, 2, 0), "500")
    runtime.handle_retry(_Message(RETRY_TOPIC, key, value, headers))  # type: ignore[arg-type]
    [dead] = producer.sent
    assert (dead.topic, dead.id, dead.key, dead.value) == (DLQ_TOPIC, change_id, key, value)
    assert dead.headers == [
        *original,
        ("error.class", b"PermanentDelivery"),
        ("error.message", b"404 no such hook"),
        ("stage", b"outbound"),
        ("plugin", b"scripted"),
        ("tenant_id", b"acme"),
        ("origin.topic", RETRY_TOPIC.encode()),
        ("origin.partition", b"0"),
        ("origin.offset", b"41"),
        ("attempts", b"3"),
        ("outbound.subscription", b"hook"),
    ]


def test_a_refused_delivery_counts_as_failed_then_dead_lettered_with_its_latency(
    outbound: tuple[Outbound, _Producer],
) -> None:
    install_meter_provider()

    def count(name: str, labels: dict[str, str]) -> float:
        return sample(render().decode(), name, labels)

    failed, parked = ({"destination": "scripted", "outcome": o} for o in ("failed", "dead_lettered"))
    before = [count("metalake_deliveries_total", failed), count("metalake_deliveries_total", parked)]
    timed = count("metalake_delivery_seconds_count", {"destination": "scripted"})
    runtime, producer = outbound
    key, value, original, _ = _change()
    runtime.handle_batch([_Message(CHANGES_TOPIC, key, value, original)])  # type: ignore[list-item]
    assert [r.topic for r in producer.sent] == [DLQ_TOPIC]
    after = [count("metalake_deliveries_total", failed), count("metalake_deliveries_total", parked)]
    assert [a - b for a, b in zip(after, before, strict=True)] == [1, 1]
    assert count("metalake_delivery_seconds_count", {"destination": "scripted"}) - timed == 1
