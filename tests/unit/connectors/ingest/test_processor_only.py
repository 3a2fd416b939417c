"""Propagated classifications are metalake's propagation processor's conclusions: no producer may send them, with
or without the PII grant (a forged ``classification.propagated`` would put a tag, and a Snowflake policy, where no
lineage leads; a forged ``unpropagated`` would withdraw one)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.ingest.validation import Rejected, to_event
from metalake.urn import asset_urn
from tests._support.runtime_fakes import PII_WRITE_KEY, WRITE_KEY, World, access_token

URN = asset_urn("snowflake", "xy12345", "SHOP", "PUBLIC", "CUSTOMERS", "EMAIL")
ORIGIN = asset_urn("postgres", "prod", "crm", "public", "customers", "email")
TYPES = ["io.metalake.classification.propagated.v1", "io.metalake.classification.unpropagated.v1"]


def _event(event_type: str) -> dict[str, Any]:
    data = {"urn": URN, "version": 1, "tag": "PII", "origin": ORIGIN, "path": [ORIGIN, URN], "depth": 1}
    return {
        "specversion": "1.0",
        "id": "ev-1",
        "source": "/producers/test",
        "type": event_type,
        "tenantid": "acme",
        "data": data,
    }


INTERNAL = [
    "io.metalake.propagation.completed.v1",
    "io.metalake.asset.erased.v1",
    "io.metalake.state.changed.v1",
    "io.metalake.subscription.test.requested.v1",
]


@pytest.mark.parametrize("event_type", INTERNAL)
def test_the_types_metalakes_processes_publish_are_refused_from_sources(event_type: str) -> None:
    with pytest.raises(Rejected) as err:
        to_event(_event(event_type), "acme")
    assert (err.value.field, str(err.value)) == (
        "type",
        "published by metalake's own processes only, never by a source",
    )


@pytest.mark.parametrize("event_type", TYPES)
def test_the_validation_refuses_them_naming_the_type(event_type: str) -> None:
    with pytest.raises(Rejected) as err:
        to_event(_event(event_type), "acme")
    assert err.value.field == "type"


@pytest.mark.parametrize("event_type", TYPES)
@pytest.mark.parametrize("credential", ["write-key", "pii-write-key", "token"])
def test_no_write_key_nor_token_gets_them_published(
    client: TestClient, world: World, event_type: str, credential: str
) -> None:
    # The token is signed here, not at collection: it lives 5 minutes, and a whole suite runs longer than that.
    token = access_token(scope="events:write tenant:admin pii:read")
    secret = {"write-key": WRITE_KEY, "pii-write-key": PII_WRITE_KEY, "token": token}[credential]
    response = client.post("/v1/events", json=[_event(event_type)], headers={"Authorization": f"Bearer {secret}"})
    assert response.status_code in (200, 400, 422), response.text
    assert response.json()["accepted"] == 0
    [result] = response.json()["results"]
    assert (result["status"], result["error"]["field"]) == ("rejected", "type")
    assert world.publisher.routed == []
