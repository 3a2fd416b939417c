"""One valid ``data`` example per event type, shared by the envelope, validation and registry tests."""

from __future__ import annotations

from typing import Any

import pytest

TABLE = "urn:metalake:postgres:prod/shop/public/orders"
COLUMN = "urn:metalake:postgres:prod/shop/public/orders/email"
UPSTREAM = "urn:metalake:postgres:prod/shop/staging/raw_orders"

EXAMPLES: dict[str, dict[str, Any]] = {
    "io.metalake.asset.upserted.v1": {
        "urn": TABLE,
        "version": 1714564800123,
        "kind": "table",
        "name": "orders",
        "description": "One row per order",
        "owners": ["data-eng@example.com"],
        "properties": {"rows": "1200"},
    },
    "io.metalake.asset.deleted.v1": {"urn": TABLE, "version": 1714564800999},
    "io.metalake.classification.added.v1": {
        "urn": COLUMN,
        "version": 7,
        "tag": "PII",
        "source": "auto",
        "propagate": True,
        "confidence": 0.97,
        "rule": "email-regex",
        "actor": None,
    },
    "io.metalake.classification.removed.v1": {"urn": COLUMN, "version": 8, "tag": "PII", "actor": "alice"},
    "io.metalake.lineage.edge.added.v1": {
        "urn": TABLE,
        "upstream": UPSTREAM,
        "version": 3,
        "blocked_tags": ["PII"],
        "transformation": "sha256(email)",
    },
    "io.metalake.lineage.edge.removed.v1": {"urn": TABLE, "upstream": UPSTREAM, "version": 4},
}


@pytest.fixture
def examples() -> dict[str, dict[str, Any]]:
    return {name: dict(data) for name, data in EXAMPLES.items()}
