"""A tracer of a local SDK provider: spans become current without touching the global provider."""

from __future__ import annotations

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.trace import Tracer


@pytest.fixture
def tracer() -> Tracer:
    return TracerProvider().get_tracer("metalake.tests")
