"""Fixtures of the admin API's integration tests (the stack-wide ones are in tests/integration/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.mongo import mongo_client
from ops.settings import Settings
from ops.stack.manager import StackManager


@pytest.fixture
def control(settings: Settings, stack: StackManager) -> Iterator[MongoClient[dict[str, Any]]]:
    """A MongoDB client set up as the API's (timezone-aware dates), for the control plane and tenant databases."""
    client = mongo_client(settings)
    yield client
    client.close()
