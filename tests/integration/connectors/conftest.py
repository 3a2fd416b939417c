"""A connector worker on the real stack (Kafka, FerretDB), with the test plugins injected instead of entry points, and
the admin API its connectors are managed through (serving the same test plugins)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.runtime.worker import build_runtime, create_app
from ops.settings import Settings
from ops.stack.manager import StackManager
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import admin_api, worker_settings


@pytest.fixture(scope="module")
def worker(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    app = create_app(worker_settings(settings), plugins=PLUGINS)
    with TestClient(app) as client:
        yield client


@pytest.fixture(scope="module")
def api(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    with admin_api(settings) as client:
        yield client


@pytest.fixture
def runtime(settings: Settings, stack: StackManager) -> Iterator[Any]:
    built = build_runtime(worker_settings(settings, source_batch_size=2), plugins=PLUGINS)
    yield built
    built.publisher.close()
    built.offsets.close()
