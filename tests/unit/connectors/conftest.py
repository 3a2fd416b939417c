"""Fixtures for the connector unit tests: a worker app over in-memory fakes (see runtime_fakes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient

from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.worker import create_app
from ops.settings import Settings
from tests._support.runtime_fakes import (
    FakeAudit,
    FakeClients,
    FakeCounter,
    FakeDeliveries,
    FakeOffsets,
    FakePublisher,
    FakeStore,
    FakeTenants,
    World,
    fake_gate,
)
from tests._support.runtime_plugins import PLUGINS


@pytest.fixture
def world() -> World:
    settings = Settings()
    settings.connect.webhook_max_body_bytes = 2048
    settings.connect.ingest_max_events = 5
    store, deliveries, publisher, offsets, counter = (
        FakeStore(),
        FakeDeliveries(),
        FakePublisher(),
        FakeOffsets(),
        FakeCounter(),
    )
    clients, tenants, audit = FakeClients(), FakeTenants(), FakeAudit()
    runtime = Runtime(
        settings=settings,
        store=cast(Any, store),
        deliveries=cast(Any, deliveries),
        publisher=cast(Any, publisher),
        offsets=cast(Any, offsets),
        plugins=plugins_from(PLUGINS),
        gate=fake_gate(clients, tenants),
        dlq_counter=counter,
        audit=audit,
    )
    return World(settings, store, deliveries, publisher, offsets, counter, runtime, clients, tenants, audit)


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.settings, runtime=world.runtime)) as test_client:
        yield test_client
