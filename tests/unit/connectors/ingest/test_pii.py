"""The ingest API's PII check (issue 12, item 1): any write key or events:write token could send a
classification.removed of a PII tag, and the access processor then rendered the column unmasked. Events that may
unmask PII need the PII grant (a write key created with it, a token with pii:read or tenant:admin) and are audited.
"""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo.errors import PyMongoError

from control.audit import target_hash
from metalake.http.problems import MEDIA_TYPE
from metalake.urn import asset_urn
from tests._support.runtime_fakes import PII_WRITE_KEY, WRITE_KEY, World, access_token

URN = asset_urn("trino", "metalake", "lake", "acme", "customers", "email")
UPSTREAM = asset_urn("trino", "metalake", "lake", "acme", "raw", "email")


def _event(i: int, event_type: str, **data: Any) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"ev-{i}",
        "source": "/producers/test",
        "type": event_type,
        "tenantid": "acme",
        "data": {"urn": URN, "version": i, **data},
    }


def _removed(i: int, tag: str = "PII") -> dict[str, Any]:
    return _event(i, "io.metalake.classification.removed.v1", tag=tag)


def _bearer(secret: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {secret}"}


WEAKENING = [
    (_removed(1), "data/tag"),
    (_removed(1, "GDPR.personal"), "data/tag"),
    (_event(1, "io.metalake.classification.added.v1", tag="PII", source="human", propagate=False), "data/propagate"),
    (_event(1, "io.metalake.lineage.edge.added.v1", upstream=UPSTREAM, blocked_tags=["PII"]), "data/blocked_tags"),
    (_event(1, "io.metalake.lineage.edge.added.v1", upstream=UPSTREAM, propagation="none"), "data/propagation"),
]


@pytest.mark.parametrize(("event", "field"), WEAKENING)
def test_a_write_key_without_the_grant_is_refused_403_naming_the_field(
    client: TestClient, world: World, event: dict[str, Any], field: str
) -> None:
    upsert = _event(0, "io.metalake.asset.upserted.v1", kind="column", name="email")
    response = client.post("/v1/events", json=[upsert, event], headers=_bearer(WRITE_KEY))
    assert response.status_code == 403, response.text
    assert response.headers["content-type"] == MEDIA_TYPE
    body = response.json()
    assert (body["type"], body["field"], body["index"]) == ("/problems/pii-grant-required", field, 1)
    # The whole request is refused: not even the harmless event of it was published.
    assert world.publisher.routed == []
    [(tenant, row)] = world.audit.rows
    assert (tenant, row.actor, row.result, row.counts) == ("acme", "write-key:k1", "refused", {"pii": 1})


@pytest.mark.parametrize(("event", "field"), WEAKENING)
def test_a_write_key_with_the_grant_is_accepted_and_audited(
    client: TestClient, world: World, event: dict[str, Any], field: str
) -> None:
    response = client.post("/v1/events", json=[event], headers=_bearer(PII_WRITE_KEY))
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 1
    assert [r.event.id for r in world.publisher.routed] == ["ev-1"]
    [(tenant, row)] = world.audit.rows
    assert (tenant, row.actor, row.result, row.counts) == ("acme", "write-key:k2", "accepted", {"pii": 1})


def test_the_audit_names_the_change_and_hashes_its_target(client: TestClient, world: World) -> None:
    assert client.post("/v1/events", json=[_removed(1)], headers=_bearer(PII_WRITE_KEY)).status_code == 200
    [(_, row)] = world.audit.rows
    assert (row.action, row.target_hash) == ("asset.tag.remove", target_hash(f"{URN}|PII"))


def test_changes_that_unmask_nothing_need_no_grant_and_are_not_audited(client: TestClient, world: World) -> None:
    events = [
        _removed(1, "finance"),
        _event(2, "io.metalake.classification.added.v1", tag="PII", source="auto"),
        _event(3, "io.metalake.lineage.edge.added.v1", upstream=UPSTREAM, blocked_tags=["finance"]),
        _event(4, "io.metalake.asset.deleted.v1"),
    ]
    response = client.post("/v1/events", json=events, headers=_bearer(WRITE_KEY))
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == 4
    assert world.audit.rows == []


@pytest.mark.parametrize(
    ("scope", "status"),
    [
        ("events:write", 403),
        ("tenant:read events:write sql:read", 403),
        ("events:write pii:read", 200),
        ("events:write tenant:admin", 200),
    ],
)
def test_tokens_need_pii_read_or_tenant_admin(client: TestClient, world: World, scope: str, status: int) -> None:
    response = client.post("/v1/events", json=[_removed(1)], headers=_bearer(access_token(scope=scope)))
    assert response.status_code == status, response.text
    [(_, row)] = world.audit.rows
    assert (row.actor, row.result) == ("mlc_test", "refused" if status == 403 else "accepted")


def test_a_worker_that_cannot_audit_accepts_no_pii_change(client: TestClient, world: World) -> None:
    object.__setattr__(world.runtime, "audit", None)
    response = client.post("/v1/events", json=[_removed(1)], headers=_bearer(PII_WRITE_KEY))
    assert response.status_code == 503, response.text
    assert world.publisher.routed == []
    # Changes that unmask nothing still flow.
    assert client.post("/v1/events", json=[_removed(2, "finance")], headers=_bearer(WRITE_KEY)).status_code == 200


DOWN = asset_urn("trino", "metalake", "lake", "acme", "mart", "email")


def test_cutting_the_lineage_a_pii_tag_travelled_needs_the_grant(client: TestClient, world: World) -> None:
    # A propagated PII tag went UPSTREAM -> URN -> DOWN: removing one of those edges, or deleting URN or DOWN, makes
    # propagation withdraw it, and DOWN (and URN) read in clear.
    asked: list[tuple[str, list[str], list[str]]] = []

    def propagated(tenant: str, urns: Any, patterns: Any) -> list[dict[str, Any]]:
        asked.append((tenant, sorted(urns), list(patterns)))
        return [{"tag": "PII", "path": [UPSTREAM, URN, DOWN]}]

    object.__setattr__(world.runtime, "propagated", propagated)
    edge = _event(1, "io.metalake.lineage.edge.removed.v1", upstream=UPSTREAM)
    deleted = {**_event(2, "io.metalake.asset.deleted.v1"), "data": {"urn": DOWN, "version": 2}}
    for event, field in ((edge, "data/upstream"), (deleted, "data/urn")):
        refused = client.post("/v1/events", json=[event], headers=_bearer(WRITE_KEY))
        assert refused.status_code == 403, refused.text
        assert (refused.json()["type"], refused.json()["field"]) == ("/problems/pii-grant-required", field)
    assert world.publisher.routed == []
    assert asked[0] == ("acme", sorted([UPSTREAM, URN]), ["PII", "PII.*", "GDPR", "GDPR.*", "consent"])
    accepted = client.post("/v1/events", json=[edge, deleted], headers=_bearer(PII_WRITE_KEY))
    assert accepted.status_code == 200 and accepted.json()["accepted"] == 2, accepted.text
    actions = [row.action for _, row in world.audit.rows if row.result == "accepted"]
    assert actions == ["lineage.edge.remove", "asset.delete"]
    # The origin's deletion freezes the tag (propagation keeps it): no grant needed.
    origin = {**_event(3, "io.metalake.asset.deleted.v1"), "data": {"urn": UPSTREAM, "version": 3}}
    assert client.post("/v1/events", json=[origin], headers=_bearer(WRITE_KEY)).status_code == 200


def test_an_unreadable_lineage_accepts_no_deletion(client: TestClient, world: World) -> None:
    def unreadable(tenant: str, urns: Any, patterns: Any) -> list[dict[str, Any]]:
        raise PyMongoError("down")

    object.__setattr__(world.runtime, "propagated", unreadable)
    deleted = {**_event(1, "io.metalake.asset.deleted.v1"), "data": {"urn": URN, "version": 1}}
    response = client.post("/v1/events", json=[deleted], headers=_bearer(WRITE_KEY))
    assert response.status_code == 503 and "Retry-After" in response.headers
    assert world.publisher.routed == []


def test_consent_tags_are_protected_like_pii_tags(client: TestClient, world: World) -> None:
    # issue 21, item 3: the consent tag filters rows in the tenant's Trino (docs/enforcement.md); removing it, or
    # cutting the lineage it travelled, shows every row to users without the PII grant.
    assert client.post("/v1/events", json=[_removed(1, "consent")], headers=_bearer(WRITE_KEY)).status_code == 403
    asked: list[str] = []

    def protective(tenant: str) -> tuple[str, ...]:
        asked.append(tenant)
        return ("PII", "opt_in")  # an engine registered with consent_tag "opt_in"

    def propagated(tenant: str, urns: Any, patterns: Any) -> list[dict[str, Any]]:
        assert "opt_in" in patterns
        return [{"tag": "opt_in", "path": [UPSTREAM, URN]}]

    object.__setattr__(world.runtime, "protective", protective)
    object.__setattr__(world.runtime, "propagated", propagated)
    refused = client.post("/v1/events", json=[_removed(2, "opt_in")], headers=_bearer(WRITE_KEY))
    assert refused.status_code == 403 and refused.json()["field"] == "data/tag"
    edge = _event(3, "io.metalake.lineage.edge.removed.v1", upstream=UPSTREAM)
    assert client.post("/v1/events", json=[edge], headers=_bearer(WRITE_KEY)).status_code == 403
    assert asked[0] == "acme"
    assert [row.result for _, row in world.audit.rows] == ["refused", "refused", "refused"]
    accepted = client.post("/v1/events", json=[_removed(4, "opt_in")], headers=_bearer(PII_WRITE_KEY))
    assert accepted.status_code == 200 and world.audit.rows[-1][1].result == "accepted"
    assert client.post("/v1/events", json=[_removed(5, "finance")], headers=_bearer(WRITE_KEY)).status_code == 200


def test_unreadable_protective_tags_accept_nothing(client: TestClient, world: World) -> None:
    def unreadable(tenant: str) -> tuple[str, ...]:
        raise PyMongoError("down")

    object.__setattr__(world.runtime, "protective", unreadable)
    response = client.post("/v1/events", json=[_removed(1, "finance")], headers=_bearer(WRITE_KEY))
    assert response.status_code == 503 and "Retry-After" in response.headers
    assert world.publisher.routed == []
