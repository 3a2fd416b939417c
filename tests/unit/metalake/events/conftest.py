"""The ``examples`` fixture: one valid ``data`` per event type (tests/_support/event_examples.py)."""

from __future__ import annotations

from typing import Any

import pytest

from tests._support import event_examples


@pytest.fixture
def examples() -> dict[str, dict[str, Any]]:
    return event_examples.examples()
