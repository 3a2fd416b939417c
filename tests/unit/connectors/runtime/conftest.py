"""Fixtures for the runtime's unit tests: a worker app over in-memory fakes (see runtime_fakes)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, cast

import pytest
from fastapi.testclient import TestClient
from runtime_fakes import FakeCounter, FakeDeliveries, FakeOffsets, FakePublisher, FakeStore, World
from runtime_plugins import PLUGINS

from connectors.runtime.context import Runtime, plugins_from
from connectors.runtime.worker import create_app
from metalake.settings import Settings


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
    runtime = Runtime(
        settings=settings,
        store=cast(Any, store),
        deliveries=cast(Any, deliveries),
        publisher=cast(Any, publisher),
        offsets=cast(Any, offsets),
        plugins=plugins_from(PLUGINS),
        dlq_counter=counter,
    )
    return World(settings, store, deliveries, publisher, offsets, counter, runtime)


@pytest.fixture
def client(world: World) -> Iterator[TestClient]:
    with TestClient(create_app(world.settings, runtime=world.runtime)) as test_client:
        yield test_client
