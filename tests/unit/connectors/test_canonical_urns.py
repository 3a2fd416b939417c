"""Issue 12, item 10: URNs were validated by pattern only, so ``.../jane doe's orders`` was stored as spelled and an
erase of the canonical ``.../jane%20doe%27s%20orders`` found nothing. Every entry point now stores the canonical
spelling: events built (``new_event``: connectors, the API, the processors), received (the ingest API, the connectors'
pipeline after transforms and webhook mappings) and decoded (``decode_record``: the streaming job)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.ingest.validation import to_event
from connectors.runtime.errors import ErrorPolicy
from connectors.runtime.pipeline import prepare
from connectors.runtime.transforms import Chain
from control.connectors.records import Tolerance
from metalake.events import CloudEvent, decode_record, new_event
from metalake.events.canonical import canonical_data, urn_fields
from metalake.urn import InvalidUrn, canonical_urn
from tests._support.runtime_fakes import WRITE_KEY, World

ODD = "urn:metalake:postgres:prod/shop/public/jane doe's orders"
CANONICAL = "urn:metalake:postgres:prod/shop/public/jane%20doe%27s%20orders"
UPSTREAM_ODD = "urn:metalake:postgres:prod/shop/raw/jane doe's orders"
UPSTREAM = "urn:metalake:postgres:prod/shop/raw/jane%20doe%27s%20orders"
ASSET = "io.metalake.asset.upserted.v1"
EDGE = "io.metalake.lineage.edge.added.v1"


def _asset(urn: str = ODD) -> dict[str, Any]:
    return {"urn": urn, "version": 1, "kind": "table", "name": "jane doe's orders"}


def test_canonical_urn_is_one_spelling_per_asset_and_idempotent() -> None:
    assert canonical_urn(ODD) == canonical_urn(CANONICAL) == CANONICAL
    assert canonical_urn("urn:metalake:postgres:prod/shop/public/jane%20doe's%20orders") == CANONICAL
    with pytest.raises(InvalidUrn):
        canonical_urn("jane doe's orders")


def test_urn_fields_come_from_the_schema_of_each_type() -> None:
    assert urn_fields(EDGE) == (("urn", "upstream"), ())
    single, lists = urn_fields("io.metalake.classification.propagated.v1")
    assert "origin" in single and "path" in lists
    data = canonical_data("io.metalake.classification.propagated.v1", {"urn": ODD, "origin": ODD, "path": [ODD, ODD]})
    assert (data["urn"], data["origin"], data["path"]) == (CANONICAL, CANONICAL, [CANONICAL, CANONICAL])


def test_new_event_stores_the_canonical_spelling_in_data_subject_and_key() -> None:
    event = new_event(EDGE, "acme", {"urn": ODD, "upstream": UPSTREAM_ODD, "version": 1}, source="/test")
    assert (event.data["urn"], event.data["upstream"]) == (CANONICAL, UPSTREAM)
    assert event.subject == CANONICAL
    assert event.partitionkey == f"acme:{CANONICAL}"


def test_a_decoded_record_from_a_producer_that_bypassed_new_event_is_canonical() -> None:
    raw = CloudEvent(
        id="e1",
        source="/raw",
        type=ASSET,
        time=datetime.now(UTC),
        subject=ODD,
        tenantid="acme",
        partitionkey=f"acme:{ODD}",
        data=_asset(),
    )
    decoded = decode_record(raw.key, raw.value(), raw.headers())
    assert decoded.data["urn"] == decoded.subject == CANONICAL
    # The subject check compares canonical forms: one spelling in the header, another in the data, is the same asset.
    mixed = raw.model_copy(update={"subject": "urn:metalake:postgres:prod/shop/public/jane%20doe's%20orders"})
    assert decode_record(mixed.key, mixed.value(), mixed.headers()).subject == CANONICAL


def _item(**over: Any) -> dict[str, Any]:
    item: dict[str, Any] = {
        "specversion": "1.0",
        "id": "ev-1",
        "source": "/producers/test",
        "type": ASSET,
        "tenantid": "acme",
        "data": _asset(),
    }
    item.update(over)
    return item


def test_the_ingest_api_stores_the_canonical_spelling(client: TestClient, world: World) -> None:
    event = to_event(_item(subject=ODD), "acme")
    assert (event.data["urn"], event.subject, event.partitionkey) == (CANONICAL, CANONICAL, f"acme:{CANONICAL}")
    response = client.post("/v1/events", json=[_item()], headers={"Authorization": f"Bearer {WRITE_KEY}"})
    assert response.status_code == 200 and response.json()["accepted"] == 1, response.text
    [routed] = world.publisher.routed
    assert routed.event.data["urn"] == routed.event.subject == CANONICAL


def test_the_connector_pipeline_canonicalises_what_a_plugin_or_mapping_emits() -> None:
    # A webhook mapping or a plugin may build the event itself, spelling the URN as the source does.
    raw = CloudEvent(
        id="e1",
        source="/webhook",
        type=EDGE,
        time=datetime.now(UTC),
        subject=ODD,
        tenantid="acme",
        partitionkey=f"acme:{ODD}",
        data={"urn": ODD, "upstream": UPSTREAM_ODD, "version": 1},
    )
    policy = ErrorPolicy(Tolerance.ALL, tenant="acme", connector="hook", plugin="test")
    prepared = prepare([(raw, "webhook")], Chain("acme"), policy)
    [routed] = prepared.routed
    assert (routed.event.data["urn"], routed.event.data["upstream"]) == (CANONICAL, UPSTREAM)
    assert (routed.event.subject, routed.event.partitionkey) == (CANONICAL, f"acme:{CANONICAL}")
    assert prepared.dead == []
