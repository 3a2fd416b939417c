"""One valid ``data`` example per event type, shared by the envelope, validation and registry tests and the tests of
``catalog.changes`` (each folder's conftest serves them as the ``examples`` fixture)."""

from __future__ import annotations

from typing import Any

TABLE = "urn:metalake:postgres:prod/shop/public/orders"
COLUMN = "urn:metalake:postgres:prod/shop/public/orders/email"
UPSTREAM = "urn:metalake:postgres:prod/shop/staging/raw_orders"
INCIDENT = "f83867b6-8f25-428b-807c-08518f63384c"

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
    "com.montecarlodata.incident.opened.v1": {
        "urn": TABLE,
        "version": 1714564800123,
        "incident_id": INCIDENT,
        "status": "opened",
        "account_id": "9a59c6f1-203a-4c72-8cd7-132db7f21b92",
        "webhook_type": "open_anomaly_incident",
        "incident_type": None,
        "feedback": None,
        "severity": None,
        "owner": None,
        "url": f"https://getmontecarlo.com/incidents/{INCIDENT}",
        "summary": "Has 42 rows vs. 101 expected",
        "table_name": "orders",
        "full_table_id": "shop:public.orders",
        "mcon": None,
    },
    "com.montecarlodata.incident.updated.v1": {
        "urn": TABLE,
        "version": 1714564900123,
        "incident_id": INCIDENT,
        "status": "updated",
        "feedback": "investigating",
        "severity": "SEV-2",
        "owner": "ana@example.com",
    },
    "com.montecarlodata.incident.resolved.v1": {
        "urn": TABLE,
        "version": 1714565000123,
        "incident_id": INCIDENT,
        "status": "resolved",
        "feedback": "fixed",
    },
    "io.metalake.classification.propagated.v1": {
        "urn": TABLE,
        "version": 7,
        "tag": "PII",
        "origin": UPSTREAM,
        "path": [UPSTREAM, TABLE],
        "depth": 1,
    },
    "io.metalake.classification.unpropagated.v1": {"urn": TABLE, "version": 8, "tag": "PII", "origin": UPSTREAM},
    "io.metalake.propagation.completed.v1": {
        "urn": UPSTREAM,
        "version": 7,
        "origin": UPSTREAM,
        "tag": "PII",
        "added": [TABLE],
        "removed": [],
        "added_count": 1,
        "removed_count": 0,
        "reached": 1,
        "max_depth": 1,
        "truncated": False,
        "reason": None,
    },
    "io.metalake.asset.erased.v1": {
        "version": 1714564900000,
        "erasure_id": "0b6f1c1e-3f4a-4d2b-9a8e-5c7d6e5f4a3b",
        "urn_sha256": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
        "include_children": True,
    },
    "io.metalake.state.changed.v1": {
        "table": "classifications",
        "key": {"urn": COLUMN, "tag": "PII"},
        "deleted": False,
        "version": 7,
        "event_id": "5f0c6d2e-8a51-4c3b-9d7e-0e1f2a3b4c52",
        "state": {"source": "auto", "propagate": True, "confidence": 0.97, "rule": "email-regex", "actor": None},
    },
    "io.metalake.subscription.test.requested.v1": {"subscription": "pii-alerts", "tag": "PII", "actor": "admin-client"},
    "io.metalake.asset.edited.v1": {
        "urn": TABLE,
        "version": 1714564800500,
        "aspect": "description",
        "text": "One row per order, net of refunds",
        "previous_text": "One row per order",
        "actor": "steward-client",
    },
    "io.metalake.asset.edit.cleared.v1": {
        "urn": TABLE,
        "version": 1714564800600,
        "aspect": "description",
        "previous_text": "One row per order, net of refunds",
        "actor": "steward-client",
    },
}


def examples() -> dict[str, dict[str, Any]]:
    """A copy a test may change."""
    return {name: dict(data) for name, data in EXAMPLES.items()}
