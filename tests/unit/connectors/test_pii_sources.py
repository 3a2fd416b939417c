"""Connectors and PII masks (issue 12, item 1): a connector's events are the tenant administrator's (only tenant:admin
creates, replaces or re-configures a connector and its transforms, and tenant:admin holds the PII grant), so the
worker does not check them per event. The built-in ones send no tag or edge change control.auth.pii.weakening counts;
these tests keep them from growing one unnoticed. (The crawler's deletions of dropped tables and foreign keys are the
source's facts: they withdraw propagated tags like any lineage change, see docs/connectors/ingest.md.)
"""

from __future__ import annotations

import json
from pathlib import Path

from connectors.montecarlo import incidents
from connectors.postgres import emit
from control.auth.pii import weakening
from control.connectors.plugin import ConnectorContext
from tenants.access.settings import AccessSettings

PATTERNS = AccessSettings().pii_tags
CONNECTORS = Path(emit.__file__).resolve().parents[1]
GOLDEN = Path(__file__).resolve().parent / "montecarlo" / "golden"


def _event_factories(package: str) -> set[str]:
    """The modules of a connector package that build events."""
    return {
        path.name
        for path in (CONNECTORS / package).glob("*.py")
        if "new_event(" in path.read_text() or "CloudEvent(" in path.read_text()
    }


def test_the_postgresql_crawler_emits_only_assets_and_plain_edges() -> None:
    # Every event of a crawl is built by emit.EventFactory, whose types are these four.
    assert _event_factories("postgres") == {"emit.py"}
    types = {v for v in vars(emit).values() if isinstance(v, str) and v.startswith("io.metalake.")}
    assert types == {emit.UPSERTED, emit.DELETED, emit.EDGE_ADDED, emit.EDGE_REMOVED}
    factory = emit.EventFactory(ConnectorContext("acme", "pg"), "postgres", "prod", 7)
    table, upstream = factory.urn("shop", "public", "orders"), factory.urn("shop", "public", "customers")
    for event in (factory.edge_added(table, upstream, "orders_customer_fk"), factory.edge_removed(table, upstream)):
        assert weakening(event.type, event.data, PATTERNS) is None
        # No blocked tags, the default direction: the edge lets every tag through downstream.
        assert not event.data.get("blocked_tags")
        assert event.data.get("propagation", "downstream") == "downstream"
    assert weakening(emit.DELETED, factory.deleted(table).data, PATTERNS) is None


def test_monte_carlo_emits_only_incidents() -> None:
    assert _event_factories("montecarlo") == {"connector.py"}
    assert incidents.event_type("opened") == "com.montecarlodata.incident.opened.v1"
    recorded = [e for path in GOLDEN.glob("*.json") for e in json.loads(path.read_text()).get("events", [])]
    assert recorded
    for event in recorded:
        assert event["type"].startswith("com.montecarlodata.incident.")
        assert weakening(event["type"], event["data"], PATTERNS) is None
