"""The publisher routes each event by its tenant's tier (the tenants directory) and turns a failed lookup into a
retriable PublishError, so the sender retries instead of getting a 500."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

import pytest
from pymongo.errors import ServerSelectionTimeoutError

from connectors.runtime.publisher import Publisher
from connectors.runtime.transforms import Routed
from metalake.events import new_event
from metalake.kafka import Delivery, PublishError, RawRecord
from ops.settings import Settings
from tenants.model import Tier
from tenants.naming import BULK_TOPIC
from tenants.registry import TenantDirectory, TenantRecord, TenantState

URN = "urn:metalake:postgres:prod/shop/public/orders"


class Registry:
    def __init__(self, records: dict[str, TenantRecord], down: bool = False) -> None:
        self.records = records
        self.down = down

    def get(self, tenant_id: str) -> TenantRecord | None:
        if self.down:
            raise ServerSelectionTimeoutError("no servers")
        return self.records.get(tenant_id)


class Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, str]] = []

    def publish_raw(self, records: Sequence[RawRecord]) -> list[Delivery]:
        self.sent += [(topic, event_id) for topic, event_id, *_ in records]
        return [Delivery(event_id, topic, 0, i) for i, (topic, event_id, *_) in enumerate(records)]

    def close(self) -> None:
        return None


def _dedicated(tenant: str) -> TenantRecord:
    now = datetime.now(UTC)
    return TenantRecord(tenant, Tier.DEDICATED, TenantState.ACTIVE, None, now, now)


def _routed(tenant: str, topic_class: str) -> Routed:
    event = new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": URN, "version": 1, "kind": "table", "name": "orders"},
        source="/tests",
    )
    return Routed(event, topic_class)  # type: ignore[arg-type]


def _publisher(registry: Registry, producer: Producer) -> Publisher:
    directory = TenantDirectory(registry, Path("/lake"))
    return Publisher(Settings(), producer=producer, directory=directory)  # type: ignore[arg-type]


def test_dedicated_and_pooled_tenants_get_their_topics() -> None:
    producer = Producer()
    publisher = _publisher(Registry({"ded": _dedicated("ded")}), producer)
    publisher.publish([_routed("ded", "priority"), _routed("ded", "bulk"), _routed("pool", "bulk")])
    assert [topic for topic, _ in producer.sent] == [
        "metalake.tenant.ded.events.priority",
        "metalake.tenant.ded.events.bulk",
        BULK_TOPIC,
    ]


def test_an_unreachable_registry_is_a_retriable_publish_error() -> None:
    producer = Producer()
    publisher = _publisher(Registry({}, down=True), producer)
    with pytest.raises(PublishError) as caught:
        publisher.publish([_routed("acme", "priority")])
    assert caught.value.retriable
    assert producer.sent == []
