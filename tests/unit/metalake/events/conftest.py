"""The ``examples`` fixture: one valid ``data`` per event type (tests/_support/event_examples.py)."""

from __future__ import annotations

from typing import Any

import event_examples
import pytest


@pytest.fixture
def examples() -> dict[str, dict[str, Any]]:
    return event_examples.examples()
