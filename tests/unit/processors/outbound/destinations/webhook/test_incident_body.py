"""The signed body of an incident change carries ``impact`` (owners, downstream count and URNs, truncated), so a
receiver needs no second call; other changes' bodies keep their fields and get no new one."""

from __future__ import annotations

import json

from control.subscriptions.store import Subscription
from processors.outbound.destinations.webhook.destination import body_of
from processors.outbound.runtime.catalog import Impact
from tests._support.outbound_helpers import as_change, classification_event, incident_event

URN = "urn:metalake:snowflake:acme-prod/analytics/public/orders"
DOWN = ("urn:metalake:snowflake:acme-prod/mart/public/a", "urn:metalake:snowflake:acme-prod/mart/public/b")
SUB = Subscription("acme", "hook", "webhook", {"url": "https://hooks.example/m"})


def test_an_incident_body_carries_its_impact() -> None:
    change = as_change(incident_event("acme", URN, "inc-7", "opened"))
    body = json.loads(body_of(change, SUB, "mld_1", Impact(("ana@example.com",), DOWN, truncated=True)))
    assert body["impact"] == {
        "owners": ["ana@example.com"],
        "downstream_count": 2,
        "downstream": list(DOWN),
        "truncated": True,
    }
    assert body["type"] == "incidents.changed" and body["change"]["asset"] == URN
    assert body["change"]["data"]["key"] == {"incident_id": "inc-7", "urn": URN}
    # Where the runtime has no catalog to read: present, and null.
    assert json.loads(body_of(change, SUB, "mld_1"))["impact"] is None


def test_other_bodies_are_unchanged() -> None:
    change = as_change(classification_event("acme", URN, "PII"))
    body = json.loads(body_of(change, SUB, "mld_2", Impact((), (), truncated=False)))
    assert sorted(body) == ["change", "id", "subscription", "tenant", "type"]
    assert sorted(body["change"]) == ["asset", "data", "id", "subject", "tag", "time", "type"]
