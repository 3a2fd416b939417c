"""A person's edits of an asset, end to end on the real stack: ``PATCH /v1/tenants/{t}/assets`` publishes edit events to
Kafka, a streaming job writes them to MongoDB and Delta (read through Trino), the API lays them over the crawler's
values; a later crawl does not overwrite them, clearing brings the crawler's value back, replays change nothing.

The shared stack's job runs the main checkout's code, so these tests start a job of this tree's code for one
dedicated tenant (its own topics, checkpoints and tables) per module, and stop it after.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from api.app import create_app
from api.auth.deps import current_principal
from control.auth.principal import Principal
from metalake.events import CloudEvent, decode_record
from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for
from tenants.registry import TenantRegistry, TenantState
from tests._support.itest import trino_rows, wait_for
from tests._support.kafka_tail import mark, read_since
from tests._support.lakeit import upsert
from tests._support.streamjob import Job, publish_confirmed
from tests._support.tokens import api_settings, auth_headers
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]
CRAWLED = {"description": "crawled", "owners": ["dba@acme.example"], "properties": {"rows": "10", "tier": "3"}}


@pytest.fixture(scope="module")
def dedicated(settings: Settings, stack: StackManager, mongo: Mongo) -> Iterator[TenantNames]:
    """A registered, active dedicated tenant (so the API routes its events to its own topics)."""
    tenant = f"it-ed-{secrets.token_hex(3)}"
    names = names_for(tenant, settings.lake_root, dedicated=True)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.DEDICATED)
    registry.set_state(tenant, TenantState.ACTIVE)
    yield names
    registry.delete(tenant)
    mongo.drop_database(names.mongo_database)


@pytest.fixture(scope="module")
def job(dedicated: TenantNames, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Job]:
    running = Job(dedicated.tenant_id, tmp_path_factory.mktemp("edits") / "job.log")
    try:
        running.wait_ready()
        yield running
    finally:
        running.stop()


@pytest.fixture(scope="module")
def client(settings: Settings, mongo: Mongo) -> Iterator[TestClient]:
    # The tests' key encryption key: the API issues real tokens for the authorization test.
    with TestClient(create_app(api_settings(settings), mongo=mongo)) as test_client:
        yield test_client


def act_as(client: TestClient, tenant: str, *scopes: str, subject: str = "steward") -> None:
    principal = Principal(subject=subject, tenant=tenant, scopes=frozenset(scopes))
    client.app.dependency_overrides[current_principal] = lambda: principal  # type: ignore[attr-defined]


def problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    if field is not None:
        assert body["field"] == field, body
    return body


def crawl(settings: Settings, names: TenantNames, urn: str, version: int, **data: Any) -> CloudEvent:
    event = upsert(names.tenant_id, urn, version=version, kind="table", name=urn.rsplit("/", 1)[1], **data)
    with EventProducer(settings) as producer:
        publish_confirmed(producer, [event], names)
    return event


def asset(client: TestClient, tenant: str, urn: str) -> dict[str, Any]:
    act_as(client, tenant, "tenant:read")
    response = client.get(f"/v1/tenants/{tenant}/assets", params={"urn": urn})
    assert response.status_code == 200, response.text
    body: dict[str, Any] = response.json()
    return body


def edit(client: TestClient, tenant: str, body: dict[str, Any]) -> dict[str, Any]:
    act_as(client, tenant, "events:write")
    response = client.patch(f"/v1/tenants/{tenant}/assets", json=body)
    assert response.status_code == 202, response.text
    accepted: dict[str, Any] = response.json()
    return accepted


def wait_shown(client: TestClient, tenant: str, urn: str, **expected: Any) -> dict[str, Any]:
    def probe() -> dict[str, Any] | None:
        act_as(client, tenant, "tenant:read")
        response = client.get(f"/v1/tenants/{tenant}/assets", params={"urn": urn})
        if response.status_code == 404:
            return None  # not projected yet
        body = asset(client, tenant, urn)
        return body if all(body.get(k) == v for k, v in expected.items()) else None

    return wait_for(f"{urn} to show {expected}", probe, timeout_s=120, interval_s=0.5)


def delta_edits(cursor: Any, names: TenantNames, urn: str) -> dict[str, tuple[Any, ...]]:
    sql = f'SELECT aspect, text, owners, deleted, version FROM "{schema_of(names)}".asset_edits WHERE urn = ?'
    return {r[0]: tuple(r[1:]) for r in trino_rows(cursor, sql, [urn]) or []}


def sql_shown(cursor: Any, names: TenantNames, urn: str) -> tuple[Any, ...] | None:
    """(description, owners, edited, properties) of the asset in the tenant's view ``assets_with_edits``."""
    sql = f'SELECT description, owners, edited, properties FROM "{schema_of(names)}".assets_with_edits WHERE urn = ?'
    rows = trino_rows(cursor, sql, [urn])
    return tuple(rows[0]) if rows else None


def test_edits_win_over_crawls_until_cleared_in_mongodb_delta_and_trino(
    settings: Settings, dedicated: TenantNames, job: Job, client: TestClient, mongo: Mongo, trino_cursor: Any
) -> None:
    tenant, urn = dedicated.tenant_id, asset_urn("postgres", "it", "shop", "public", "orders")
    crawl(settings, dedicated, urn, 1, **CRAWLED)
    wait_shown(client, tenant, urn, description="crawled")

    accepted = edit(
        client,
        tenant,
        {"urn": urn, "description": "by a person", "owners": ["alice@acme.example"], "properties": {"tier": "1"}},
    )
    assert [c["aspect"] for c in accepted["changes"]] == ["description", "owners", "properties.tier"]
    # Three events, maybe in different batches of the projection: wait for all three.
    shown = wait_shown(client, tenant, urn, edited=["description", "owners", "properties.tier"])
    assert (shown["description"], shown["owners"]) == ("by a person", ["alice@acme.example"])
    assert shown["properties"] == {"rows": "10", "tier": "1"}

    # The same edit again publishes nothing: the asset already shows it.
    assert edit(client, tenant, {"urn": urn, "description": "by a person"})["changes"] == []

    # A later crawl with other values: the source's values change underneath, the person's stay on top.
    crawl(
        settings, dedicated, urn, 2, description="crawled again", owners=["etl@acme.example"], properties={"rows": "11"}
    )
    assets = mongo[dedicated.mongo_database]["assets"]
    wait_for("the crawl in MongoDB", lambda: assets.find_one({"_id": urn, "version": 2}), timeout_s=120)
    shown = asset(client, tenant, urn)
    assert (shown["description"], shown["owners"]) == ("by a person", ["alice@acme.example"])
    assert shown["properties"] == {"rows": "11", "tier": "1"}

    # Delta, through Trino: the edits are rows of asset_edits; the assets row keeps the crawler's values.
    def in_delta() -> dict[str, tuple[Any, ...]] | None:
        assert job.alive, job.tail()
        rows = delta_edits(trino_cursor, dedicated, urn)
        return rows if len(rows) == 3 else None

    rows = wait_for("the edits in Delta", in_delta, timeout_s=180, interval_s=1)
    assert rows["description"][:3] == ("by a person", None, False)
    assert rows["owners"][1:3] == (["alice@acme.example"], False)
    assert rows["properties.tier"][:1] == ("1",)

    # The tenant's view assets_with_edits shows what the API shows: the crawl's new values under the edits.
    def in_view() -> tuple[Any, ...] | None:
        row = sql_shown(trino_cursor, dedicated, urn)
        return row if row is not None and row[3] == {"rows": "11", "tier": "1"} else None  # the crawl is in Delta

    shown_in_sql = wait_for("the crawl and the edits in assets_with_edits", in_view, timeout_s=180, interval_s=1)
    assert shown_in_sql == (
        "by a person",
        ["alice@acme.example"],
        ["description", "owners", "properties.tier"],
        {"rows": "11", "tier": "1"},
    )

    # Clearing: the crawler's value shows again, in the API and as a tombstone in Delta.
    cleared = edit(client, tenant, {"urn": urn, "description": None, "properties": {"tier": None}})
    assert [(c["aspect"], c["type"]) for c in cleared["changes"]] == [
        ("description", "io.metalake.asset.edit.cleared.v1"),
        ("properties.tier", "io.metalake.asset.edit.cleared.v1"),
    ]
    shown = wait_shown(client, tenant, urn, description="crawled again", edited=["owners"])
    assert shown["properties"] == {"rows": "11"}
    assert shown["owners"] == ["alice@acme.example"]
    wait_for(
        "the tombstone in Delta",
        lambda: delta_edits(trino_cursor, dedicated, urn)["description"][2] is True or None,
        timeout_s=180,
        interval_s=1,
    )
    expected = ("crawled again", ["alice@acme.example"], ["owners"], {"rows": "11"})
    wait_for(
        "the cleared edits out of assets_with_edits",
        lambda: sql_shown(trino_cursor, dedicated, urn) == expected or None,
        timeout_s=60,
        interval_s=1,
    )

    # Audited: who, which aspect (the target is urn|aspect, stored hashed), set or cleared.
    act_as(client, tenant, "tenant:admin", subject="auditor")
    rows_audit = client.get(f"/v1/tenants/{tenant}/audit", params={"target": f"{urn}|description"}).json()["items"]
    assert sorted((r["actor"], r["action"], r["counts"]["cleared"]) for r in rows_audit) == [
        ("steward", "asset.edit.description", 0),
        ("steward", "asset.edit.description", 1),
    ]


def test_a_replayed_edit_changes_nothing(
    settings: Settings, dedicated: TenantNames, job: Job, client: TestClient, mongo: Mongo
) -> None:
    tenant, urn = dedicated.tenant_id, asset_urn("postgres", "it", "shop", "public", "customers")
    crawl(settings, dedicated, urn, 1, **CRAWLED)
    wait_shown(client, tenant, urn, description="crawled")
    edit(client, tenant, {"urn": urn, "description": "first"})
    wait_shown(client, tenant, urn, description="first")
    edit(client, tenant, {"urn": urn, "description": None})
    wait_shown(client, tenant, urn, description="crawled", edited=[])

    # Replay both edit events as Kafka holds them (same ids and versions), twice, then a marker crawl after them.
    edits = mongo[dedicated.mongo_database]["asset_edits"]
    held = edits.find_one({"_id": f"{urn}|description"})
    assert held is not None and held["deleted"] is True
    events = [e for e in _events_of(settings, dedicated, urn, 3) if e.type.startswith("io.metalake.asset.edit")]
    assert [e.type for e in events] == ["io.metalake.asset.edited.v1", "io.metalake.asset.edit.cleared.v1"]
    with EventProducer(settings) as producer:
        publish_confirmed(producer, [*events, *events], dedicated)
    crawl(settings, dedicated, urn, 2, description="marker")
    wait_shown(client, tenant, urn, description="marker", edited=[])
    after = edits.find_one({"_id": f"{urn}|description"})
    assert after is not None
    assert (after["version"], after["event_id"], after["deleted"]) == (held["version"], held["event_id"], True)


def _events_of(settings: Settings, names: TenantNames, urn: str, expect: int) -> list[CloudEvent]:
    """The tenant's events about ``urn`` on its priority topic (its own: read from the start), by version."""
    topic = names.priority_topic
    start = dict.fromkeys(mark(settings, topic), 0)
    records = read_since(settings, topic, start, lambda r: r.headers.get("ce_subject") == urn.encode(), expect=expect)
    events = [decode_record(r.key, r.value, list(r.headers.items())) for r in records]
    return sorted(events, key=lambda e: (e.data["version"], e.id))


def test_edit_authorization_and_bad_input(
    settings: Settings, dedicated: TenantNames, job: Job, client: TestClient, mongo: Mongo
) -> None:
    tenant, urn = dedicated.tenant_id, asset_urn("postgres", "it", "shop", "public", "refunds")
    crawl(settings, dedicated, urn, 1, **CRAWLED)
    wait_shown(client, tenant, urn, description="crawled")
    path = f"/v1/tenants/{tenant}/assets"

    # A read-only client may read the asset but not edit it; another tenant's client sees nothing.
    act_as(client, tenant, "tenant:read", "sql:read")
    problem(client.patch(path, json={"urn": urn, "description": "x"}), 403)
    act_as(client, "it-other", "tenant:admin")
    problem(client.patch(path, json={"urn": urn, "description": "x"}), 404)

    act_as(client, tenant, "tenant:admin")
    problem(client.patch(path, json={"urn": urn}), 422, "body")
    problem(client.patch(path, json={"urn": urn, "colour": "red"}), 422)
    problem(client.patch(path, json={"urn": urn, "owners": "alice"}), 422)
    problem(
        client.patch(path, json={"urn": urn, "description": "x" * (settings.api.edit_description_max + 1)}),
        422,
        "description",
    )
    problem(client.patch(path, json={"urn": urn, "owners": ["a"] * (settings.api.edit_owners_max + 1)}), 422, "owners")
    problem(client.patch(path, json={"urn": urn, "owners": ["ok", ""]}), 422, "owners.1")
    problem(client.patch(path, json={"urn": urn, "properties": {"bad|name": "1"}}), 422, "properties")
    long_value = "v" * (settings.api.edit_property_value_max + 1)
    problem(client.patch(path, json={"urn": urn, "properties": {"tier": long_value}}), 422, "properties.tier")
    too_many = {f"p{i}": "1" for i in range(2 * settings.api.edit_properties_max + 1)}
    problem(client.patch(path, json={"urn": urn, "properties": too_many}), 422, "properties")
    problem(
        client.patch(path, json={"urn": asset_urn("postgres", "it", "shop", "public", "nope"), "owners": []}),
        404,
        "urn",
    )
    # Nothing was published by any of these: the asset shows no edit.
    assert asset(client, tenant, urn)["edited"] == []

    # Real tokens: a read-only client (tenant:read sql:read) is refused, a read-write one (events:write) may edit.
    client.app.dependency_overrides.clear()  # type: ignore[attr-defined]
    read_only = auth_headers(client, tenant=tenant, role="read-only")
    refused = problem(client.patch(path, json={"urn": urn, "description": "x"}, headers=read_only), 403)
    assert refused["type"].endswith("insufficient-scope")
    read_write = auth_headers(client, tenant=tenant, role="read-write")
    answer = client.patch(path, json={"urn": urn, "properties": {"tier": "2"}}, headers=read_write)
    assert answer.status_code == 202, answer.text
    shown = wait_shown(client, tenant, urn, edited=["properties.tier"])
    assert shown["properties"] == {"rows": "10", "tier": "2"}

    # The most edited properties an asset holds (here 1): another one is 409; replacing or clearing it is not.
    with TestClient(create_app(api_settings(settings, edit_properties_max=1), mongo=mongo)) as small:
        act_as(small, tenant, "tenant:admin")
        problem(small.patch(path, json={"urn": urn, "properties": {"domain": "sales"}}), 409, "properties")
        swap = small.patch(path, json={"urn": urn, "properties": {"tier": None, "domain": "sales"}})
        assert swap.status_code == 202, swap.text
    shown = wait_shown(client, tenant, urn, edited=["properties.domain"])
    assert shown["properties"] == {"rows": "10", "tier": "3", "domain": "sales"}
