"""The ingest API as pure logic: body splitting (JSON, array, NDJSON with line errors), per-event checks, write keys."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.ingest.parsing import BodyError, split_body
from connectors.ingest.validation import Rejected, to_event
from connectors.runtime.worker import create_app
from metalake.http.problems import MEDIA_TYPE
from metalake.http.ratelimit import RateLimiter
from metalake.urn import asset_urn
from tests._support.runtime_fakes import WRITE_KEY, World, access_token

URN = asset_urn("pg", "prod", "shop", "public", "orders")
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}


def _event(i: int = 0, **over: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "specversion": "1.0",
        "id": f"ev-{i}",
        "source": "/producers/test",
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": "acme",
        "data": {"urn": URN, "version": i, "kind": "table", "name": "orders"},
    }
    event.update(over)
    return event


# -- parsing ----------------------------------------------------------------------------------------------------------


def test_one_object_an_array_and_ndjson() -> None:
    assert split_body(b'{"a": 1}', "application/json", 10) == [{"a": 1}]
    assert split_body(b'[{"a": 1}, {"b": 2}]', "application/json; charset=utf-8", 10) == [{"a": 1}, {"b": 2}]
    assert split_body(b'{"a": 1}\n\n{"b": 2}\n', "application/x-ndjson", 10) == [{"a": 1}, {"b": 2}]


def test_ndjson_parse_error_names_the_line() -> None:
    with pytest.raises(BodyError) as err:
        split_body(b'{"a": 1}\n{"b": \n{"c": 3}\n', "application/x-ndjson", 10)
    assert err.value.line == 2 and err.value.status == 400
    assert "line 2" in str(err.value)


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"{nope", "application/json", 400),
        (b"[]", "application/json", 400),
        (b'{"a": NaN}', "application/json", 400),
        (b"[1,2,3,4]", "application/json", 413),
        (b"1\n2\n3\n4\n", "application/x-ndjson", 413),
        (b"{}", "text/plain", 415),
    ],
)
def test_bodies_that_are_refused(body: bytes, content_type: str, status: int) -> None:
    with pytest.raises(BodyError) as err:
        split_body(body, content_type, 3)
    assert err.value.status == status


# -- one event --------------------------------------------------------------------------------------------------------


def test_a_valid_event_keys_by_tenant_and_urn() -> None:
    event = to_event(_event(), "acme")
    assert event.partitionkey == f"acme:{URN}"
    assert event.subject == URN


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"tenantid": "other"}, "tenantid"),
        ({"type": "io.unknown.v1"}, "type"),
        # A person's edits come from the admin API only (the actor from the token, audited).
        ({"type": "io.metalake.asset.edited.v1", "data": {"urn": URN, "version": 1, "aspect": "description"}}, "type"),
        ({"type": "io.metalake.asset.edit.cleared.v1", "data": {"urn": URN, "version": 1, "aspect": "owners"}}, "type"),
        ({"specversion": "0.3"}, "specversion"),
        ({"data": {"urn": URN, "version": 1, "kind": "table"}}, "data/(root)"),
        ({"data": {"urn": URN, "version": -1, "kind": "table", "name": "x"}}, "data/version"),
        ({"subject": "urn:metalake:pg:prod/other"}, "subject"),
        ({"partitionkey": "other:x"}, "partitionkey"),
        ({"extension": "x"}, "extension"),
        ({"time": "yesterday"}, "time"),
    ],
)
def test_rejections_name_the_field(change: dict[str, Any], field: str) -> None:
    with pytest.raises(Rejected) as err:
        to_event(_event(**change), "acme")
    assert err.value.field == field


def test_missing_attribute_is_named() -> None:
    item = _event()
    del item["source"]
    with pytest.raises(Rejected) as err:
        to_event(item, "acme")
    assert err.value.field == "source"


def test_rejections_never_quote_values() -> None:
    secret_value = "4111-1111-1111-1111"
    with pytest.raises(Rejected) as err:
        to_event(_event(data={"urn": URN, "version": 1, "kind": "table", "name": "x", "owners": secret_value}), "acme")
    assert secret_value not in str(err.value)


# -- the route --------------------------------------------------------------------------------------------------------


def test_mixed_array_gets_per_event_results(client: TestClient, world: World) -> None:
    body = [_event(1), _event(2, tenantid="other"), "not an object", _event(3), _event(3)]
    response = client.post("/v1/events", json=body, headers=AUTH)
    assert response.status_code == 200, response.text
    answer = response.json()
    assert answer["accepted"] == 2 and answer["rejected"] == 3
    assert [r["status"] for r in answer["results"]] == ["accepted", "rejected", "rejected", "accepted", "rejected"]
    assert answer["results"][1]["error"]["field"] == "tenantid"
    assert answer["results"][4]["error"]["field"] == "id"
    assert [r.event.id for r in world.publisher.routed] == ["ev-1", "ev-3"]


def test_ndjson_with_the_write_key_header(client: TestClient, world: World) -> None:
    body = "\n".join(json.dumps(_event(i)) for i in range(3)).encode()
    response = client.post(
        "/v1/events", content=body, headers={"X-Metalake-Write-Key": WRITE_KEY, "Content-Type": "application/x-ndjson"}
    )
    assert response.status_code == 200 and response.json()["accepted"] == 3


def test_ndjson_error_is_a_problem_with_the_line(client: TestClient) -> None:
    response = client.post(
        "/v1/events", content=b'{"a":1}\n{oops\n', headers={**AUTH, "Content-Type": "application/x-ndjson"}
    )
    assert response.status_code == 400
    assert response.headers["content-type"] == MEDIA_TYPE
    assert response.json()["line"] == 2


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer mlk_k1_wrong"}, {"Authorization": "Basic x"}])
def test_missing_or_wrong_write_key_is_401(client: TestClient, world: World, headers: dict[str, str]) -> None:
    response = client.post("/v1/events", json=_event(), headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert world.publisher.routed == []


def test_too_many_events_is_413(client: TestClient) -> None:
    response = client.post("/v1/events", json=[_event(i) for i in range(6)], headers=AUTH)
    assert response.status_code == 413
    assert response.json()["type"] == "/problems/too-many-events"


def test_kafka_down_is_503_and_nothing_accepted(client: TestClient, world: World) -> None:
    world.publisher.down = True
    response = client.post("/v1/events", json=[_event(1)], headers=AUTH)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "30"
    assert world.publisher.routed == []


@pytest.mark.parametrize("content_type", ["application/json", "application/x-ndjson"])
def test_json_nested_too_deeply_is_400_with_the_reason_not_a_500(
    client: TestClient, world: World, content_type: str
) -> None:
    # Deeper than json's limit on every Python we support: RecursionError is no ValueError, and it escaped as a 500.
    body = b"[" * 100_000 + b"]" * 100_000
    response = client.post("/v1/events", content=body, headers={**AUTH, "Content-Type": content_type})
    assert response.status_code == 400, response.text
    assert response.headers["content-type"] == MEDIA_TYPE
    problem = response.json()
    assert problem["type"] == "/problems/invalid-body" and problem["field"] == "body"
    assert problem["detail"].endswith("is not JSON (nested too deeply)")
    assert world.publisher.routed == []


# -- the actor comes from the credential (issue 21, item 15) -------------------------------------------------------


def _tag_event(i: int, event_type: str, **data: Any) -> dict[str, Any]:
    data = {"urn": URN, "version": i, "tag": "finance", **data}
    if event_type.endswith("added.v1"):
        data["source"] = "human"
    return _event(i, type=event_type, data=data)


@pytest.mark.parametrize(
    ("auth", "actor"),
    [(AUTH, "write-key:k1"), ({"Authorization": f"Bearer {access_token(scope='events:write')}"}, "mlc_test")],
)
def test_the_actor_of_a_tag_change_is_the_credential_whatever_the_body_says(
    client: TestClient, world: World, auth: dict[str, str], actor: str
) -> None:
    # The actor is shown as who made the change in Slack, Teams, Jira and webhooks: a sender must not name another.
    body = [
        _tag_event(1, "io.metalake.classification.added.v1", actor="<!channel> the CFO"),
        _tag_event(2, "io.metalake.classification.removed.v1", actor="dpo@example.com"),
        _tag_event(3, "io.metalake.classification.added.v1"),  # none given: the credential's too
    ]
    response = client.post("/v1/events", json=body, headers=auth)
    assert response.status_code == 200 and response.json()["accepted"] == 3, response.text
    assert [r.event.data["actor"] for r in world.publisher.routed] == [actor, actor, actor]


def test_without_a_credential_actor_the_bodys_is_dropped_not_kept() -> None:
    event = to_event(_tag_event(1, "io.metalake.classification.added.v1", actor="someone else"), "acme")
    assert "actor" not in event.data
    assert "actor" not in to_event(_event(), "acme", "write-key:k1").data  # a type without an actor gets none


def test_a_tenant_over_its_events_budget_gets_429_and_nothing_is_published(world: World) -> None:
    # One tenant's bulk posts share the worker, Kafka and the streaming job with every tenant (issue 21, item 16).
    now = [0.0]
    budget = RateLimiter(rate=2.0, burst=4, clock=lambda: now[0])
    runtime = dataclasses.replace(world.runtime, event_budget=budget)
    with TestClient(create_app(world.settings, runtime=runtime)) as client:
        first = client.post("/v1/events", json=[_event(i) for i in range(4)], headers=AUTH)
        assert first.status_code == 200 and first.json()["accepted"] == 4
        over = client.post("/v1/events", json=[_event(4), _event(5)], headers=AUTH)
        assert over.status_code == 429 and over.headers["retry-after"] == "1", over.text
        assert over.json()["type"] == "/problems/rate-limited"
        assert [r.event.id for r in world.publisher.routed] == [f"ev-{i}" for i in range(4)]
        now[0] += 1.0  # two events' worth refilled
        again = client.post("/v1/events", json=[_event(4), _event(5)], headers=AUTH)
        assert again.status_code == 200 and again.json()["accepted"] == 2
