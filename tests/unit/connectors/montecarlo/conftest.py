"""Shared fixtures of the Monte Carlo connector tests.

Golden files: every ``fixtures/<name>.json`` is a delivery body exactly as Monte Carlo would POST it, and
``golden/<name>.json`` is what the connector makes of it: the events (``id``, ``type``, ``subject``, ``key``,
``data``) or, for a delivery it refuses, the error (``class``, ``field``, ``message``). ``test_golden.py`` compares the
two. After an intended change of output, rewrite the golden files and review the diff before committing::

    METALAKE_UPDATE_GOLDEN=1 .stack/venv/bin/pytest tests/unit/connectors/montecarlo

A new fixture without a golden file fails until the golden file is written this way.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

import pytest

from connectors.montecarlo import MonteCarloConfig, MonteCarloConnector
from control.connectors.plugin import ConnectorContext, InboundRequest

HERE = Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures"
RECEIVED_AT = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
# Mapped warehouse of the fixtures (written in upper case there: UUIDs compare case-insensitively).
WAREHOUSE = "5f1c3a7e-0d2b-4c6a-9e8f-112233445566"

CONFIG: dict[str, object] = {
    "default_platform": "snowflake",
    "default_instance": "acme-prod",
    "warehouses": {WAREHOUSE: {"platform": "bigquery", "instance": "acme-analytics"}},
}


@pytest.fixture
def config_values() -> dict[str, object]:
    """The fixtures' connector configuration, as a tenant admin would submit it (a fresh copy per test)."""
    return copy.deepcopy(CONFIG)


@pytest.fixture
def connector(config_values: dict[str, object]) -> MonteCarloConnector:
    config = MonteCarloConfig.model_validate(config_values)
    return MonteCarloConnector(config, ConnectorContext(tenant_id="acme", connector_name="montecarlo"))


@pytest.fixture
def received_at() -> datetime:
    return RECEIVED_AT


@pytest.fixture
def request_for() -> Callable[..., InboundRequest]:
    def build(
        body: bytes, headers: Mapping[str, str] | None = None, received_at: datetime = RECEIVED_AT
    ) -> InboundRequest:
        return InboundRequest(headers=dict(headers or {}), body=body, received_at=received_at)

    return build


@pytest.fixture
def fixture_body() -> Callable[[str], bytes]:
    """``fixture_body("open_anomaly")``: the bytes of ``fixtures/open_anomaly.json``."""

    def read(name: str) -> bytes:
        return (FIXTURES / f"{name}.json").read_bytes()

    return read
