"""The streaming job's changes keep to the metalake.changes contract: every state table fits the schema, and what the
job publishes decodes back into the rows it wrote."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from catalog.changes import STATE_CHANGED, decode_change
from metalake.events import spec_for
from processors.enrichment.changes import change_events
from processors.enrichment.health import HEALTH
from processors.enrichment.state import STATE_SPECS, StateSpec

SCHEMA = spec_for(STATE_CHANGED).schema
URN = "urn:metalake:postgres:prod/shop/public/orders/email"
UPSTREAM = "urn:metalake:postgres:prod/shop/staging/raw_orders/email"
KEYS: dict[str, Any] = {
    "urn": URN,
    "tag": "PII",
    "upstream": UPSTREAM,
    "origin": UPSTREAM,
    "incident_id": "inc-1",
    "aspect": "description",
}


@pytest.mark.parametrize("spec", [*STATE_SPECS, HEALTH], ids=lambda s: s.table)
def test_every_state_table_fits_the_schema(spec: StateSpec) -> None:
    assert spec.table in SCHEMA["properties"]["table"]["enum"]
    assert set(spec.key) <= set(SCHEMA["properties"]["key"]["properties"])
    assert "urn" in spec.key


def test_the_schema_names_no_table_the_job_does_not_write() -> None:
    assert set(SCHEMA["properties"]["table"]["enum"]) == {s.table for s in (*STATE_SPECS, HEALTH)}


def _row(spec: StateSpec, deleted: bool = False) -> dict[str, Any]:
    values: dict[str, Any] = {"owners": ["a@example.com"], "path": [UPSTREAM, URN], "depth": 1, "source": "human"}
    return {
        **{k: KEYS[k] for k in spec.key},
        **{f: values.get(f) for f in spec.fields},
        "deleted": deleted,
        "version": 1714564800123,
        "event_id": str(uuid.uuid4()),
        "event_time": datetime(2024, 5, 1, tzinfo=UTC),
        "updated_at": datetime(2024, 5, 1, tzinfo=UTC),
    }


@pytest.mark.parametrize("spec", [*STATE_SPECS, HEALTH], ids=lambda s: s.table)
@pytest.mark.parametrize("deleted", [False, True])
def test_what_the_job_publishes_decodes_into_the_row_it_wrote(spec: StateSpec, deleted: bool) -> None:
    row = _row(spec, deleted)
    [event] = change_events("acme", spec, [row])
    change = decode_change(event.key, event.value(), event.headers()).state_change
    assert change is not None
    assert (change.tenant, change.table, change.urn) == ("acme", spec.table, URN)
    assert change.row == {c: row[c] for c in (*spec.fields, *spec.key, "deleted", "version", "event_id")}
    assert list(change.key) == list(spec.key)
    assert event.key == b"acme"  # keyed by tenant: one instance of each consumer group holds a whole tenant


def test_a_change_carries_the_trace_of_the_event_that_made_its_row() -> None:
    traced, other = _row(STATE_SPECS[0]), _row(STATE_SPECS[0])
    other["urn"] = UPSTREAM
    context = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    events = change_events("acme", STATE_SPECS[0], [traced, other], {traced["event_id"]: context})
    assert [dict(e.headers()).get("ce_traceparent") for e in events] == [context.encode(), None]
