"""The assets routes on the real FerretDB, the caller stood in by a dependency override (the token tests are apart).

Documents are written with the streaming job's own projection code (``spec_upsert`` + ``apply_upserts``), so the
routes read exactly the shapes the job writes: ids, key fields, versions and ``deleted`` tombstones.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from pymongo.database import Database

from api.app import create_app
from api.auth.deps import current_principal
from api.services.catalog import ensure_indexes
from catalog.projection import escape_keys
from control.auth.principal import Principal
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.state import ASSETS, CLASSIFICATIONS, INCIDENTS, LINEAGE
from tenants.naming import names_for
from tests._support.stateseed import seed

pytestmark = pytest.mark.integration


def urn(*path: str) -> str:
    return "urn:metalake:postgres:prod/" + "/".join(path)


@pytest.fixture
def db(mongo: MongoClient[dict[str, Any]], settings: Settings, tenant: str) -> Iterator[Database[dict[str, Any]]]:
    database = mongo[names_for(tenant, settings.lake_root).mongo_database]
    ensure_indexes(database)
    yield database
    mongo.drop_database(database.name)


@pytest.fixture
def client(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    app = create_app(settings, mongo=mongo)
    with TestClient(app) as test_client:
        yield test_client
    mongo.close()


def act_as(client: TestClient, tenant: str | None, *scopes: str, subject: str = "it-client") -> None:
    principal = Principal(subject=subject, tenant=tenant, scopes=frozenset(scopes))
    client.app.dependency_overrides[current_principal] = lambda: principal  # type: ignore[attr-defined]


def problem(response: Any, status: int, field: str | None = None) -> dict[str, Any]:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/problem+json"
    body: dict[str, Any] = response.json()
    if field is not None:
        assert body["field"] == field
    return body


def test_get_an_asset_with_its_tags(client: TestClient, db: Database[dict[str, Any]], tenant: str) -> None:
    email = urn("shop", "public", "customers", "email")
    seed(db, ASSETS, urn=email, kind="column", name="email", platform="postgres", owners=["a@x.example"])
    # Stored escaped by the job (FerretDB refuses "." in a field name): the API gives the source's names back.
    db[ASSETS.collection].update_one(
        {"_id": email}, {"$set": {"properties": escape_keys({"dbt.meta.owner": "a", "x": "1"})}}
    )
    seed(db, CLASSIFICATIONS, urn=email, tag="PII", source="human", propagate=True, actor="alice")
    seed(db, CLASSIFICATIONS, urn=email, tag="Old", source="human", deleted=True)
    db["propagated_tags"].insert_one(
        {"_id": f"{email}|GDPR|{urn('crm')}", "urn": email, "tag": "GDPR", "origin": urn("crm"), "depth": 1}
    )
    act_as(client, tenant, "tenant:read")
    response = client.get(f"/v1/tenants/{tenant}/assets", params={"urn": email})
    assert response.status_code == 200, response.text
    body = response.json()
    assert (body["urn"], body["kind"], body["name"], body["owners"]) == (email, "column", "email", ["a@x.example"])
    assert [(t["tag"], t["source"], t["actor"]) for t in body["tags"]] == [("PII", "human", "alice")]
    assert [(t["tag"], t["origin"], t["depth"]) for t in body["propagated_tags"]] == [("GDPR", urn("crm"), 1)]
    assert "_id" not in body and "deleted" not in body
    assert body["properties"] == {"dbt.meta.owner": "a", "x": "1"}


def test_unknown_and_deleted_assets_are_404(client: TestClient, db: Database[dict[str, Any]], tenant: str) -> None:
    gone = urn("shop", "public", "gone")
    seed(db, ASSETS, urn=gone, kind="table", name="gone", deleted=True)
    act_as(client, tenant, "tenant:read")
    problem(client.get(f"/v1/tenants/{tenant}/assets", params={"urn": gone}), 404, "urn")
    problem(client.get(f"/v1/tenants/{tenant}/assets", params={"urn": urn("nope")}), 404, "urn")


def test_another_tenants_principal_gets_404_never_data(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    table = urn("shop", "public", "orders")
    seed(db, ASSETS, urn=table, kind="table", name="orders")
    act_as(client, "it-other", "tenant:read", "tenant:admin")
    for response in (
        client.get(f"/v1/tenants/{tenant}/assets", params={"urn": table}),
        client.get(f"/v1/tenants/{tenant}/assets/search", params={"prefix": "ord"}),
        client.get(f"/v1/tenants/{tenant}/assets/lineage", params={"urn": table}),
        client.get(f"/v1/tenants/{tenant}/assets/incidents"),
        client.post(f"/v1/tenants/{tenant}/assets/tags", json={"urn": table, "tag": "PII"}),
        client.delete(f"/v1/tenants/{tenant}/assets/tags", params={"urn": table, "tag": "PII"}),
    ):
        problem(response, 404)
        assert "orders" not in response.text


def test_search_by_prefix_pages_through_everything_once(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    names = ["orders", "orders_2024", "orders_archive", "order_items", "customers", "Orders_upper"]
    for i, name in enumerate(names):
        seed(db, ASSETS, urn=urn("shop", f"s{i}", name), kind="table", name=name)
    seed(db, ASSETS, urn=urn("shop", "x", "orders_deleted"), kind="table", name="orders_deleted", deleted=True)
    act_as(client, tenant, "tenant:read")
    seen: list[str] = []
    cursor: str | None = None
    pages = 0
    while True:
        params: dict[str, Any] = {"prefix": "orders", "limit": 2}
        if cursor:
            params["cursor"] = cursor
        response = client.get(f"/v1/tenants/{tenant}/assets/search", params=params)
        assert response.status_code == 200, response.text
        page = response.json()
        seen += [item["name"] for item in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == ["orders", "orders_2024", "orders_archive"]  # case-sensitive, tombstones skipped, sorted
    assert pages == 2
    # A regex metacharacter in the prefix is taken literally.
    dotted = client.get(f"/v1/tenants/{tenant}/assets/search", params={"prefix": "order."})
    assert dotted.json()["items"] == []


def test_search_by_tag_and_classification(client: TestClient, db: Database[dict[str, Any]], tenant: str) -> None:
    a, b, c = urn("db", "s", "t", "a"), urn("db", "s", "t", "b"), urn("db", "s", "t", "c")
    for u, name in ((a, "a"), (b, "b"), (c, "c")):
        seed(db, ASSETS, urn=u, kind="column", name=name)
    seed(db, CLASSIFICATIONS, urn=a, tag="PII", source="human")
    seed(db, CLASSIFICATIONS, urn=a, tag="GDPR.personal", source="auto")
    seed(db, CLASSIFICATIONS, urn=b, tag="PII", source="human", deleted=True)  # removed
    db["propagated_tags"].insert_one({"_id": f"{c}|PII|{a}", "urn": c, "tag": "PII", "origin": a, "deleted": False})
    act_as(client, tenant, "tenant:read")

    def search(**params: Any) -> list[tuple[str, list[str]]]:
        response = client.get(f"/v1/tenants/{tenant}/assets/search", params=params)
        assert response.status_code == 200, response.text
        return [(i["urn"], i["tags"]) for i in response.json()["items"]]

    assert search(tag="PII") == [(a, ["GDPR.personal", "PII"]), (c, ["PII"])]
    assert search(tag=["PII", "GDPR.personal"]) == [(a, ["GDPR.personal", "PII"])]
    assert search(classification="GDPR") == [(a, ["GDPR.personal", "PII"])]
    assert search(tag="PII", prefix="c") == [(c, ["PII"])]
    assert search(tag="Nothing") == []
    problem(client.get(f"/v1/tenants/{tenant}/assets/search", params={"tag": "bad tag!"}), 422, "tag/0")


def test_bad_cursors_are_400_naming_cursor(client: TestClient, db: Database[dict[str, Any]], tenant: str) -> None:
    for i in range(3):
        seed(db, ASSETS, urn=urn("db", "s", f"t{i}"), kind="table", name=f"t{i}")
    act_as(client, tenant, "tenant:read")
    by_urn = client.get(f"/v1/tenants/{tenant}/assets/search", params={"limit": 1}).json()["next_cursor"]
    assert by_urn is not None
    # A cursor of the URN-ordered listing does not resume the name-ordered one, nor the incidents.
    problem(client.get(f"/v1/tenants/{tenant}/assets/search", params={"prefix": "t", "cursor": by_urn}), 400, "cursor")
    problem(client.get(f"/v1/tenants/{tenant}/assets/incidents", params={"cursor": by_urn}), 400, "cursor")
    problem(client.get(f"/v1/tenants/{tenant}/assets/search", params={"cursor": "%%%"}), 400, "cursor")


def _chain(db: Database[dict[str, Any]]) -> list[str]:
    # raw -> staged -> mart -> report, plus staged -> audit and a removed edge raw -> legacy.
    raw, staged, mart, report, extra = (urn("wh", "s", n) for n in ("raw", "staged", "mart", "report", "extra"))
    for u in (raw, staged, mart, report, extra):
        seed(db, ASSETS, urn=u, kind="table", name=u.rsplit("/", 1)[1])
    seed(db, LINEAGE, upstream=raw, urn=staged, transformation="dbt", blocked_tags=[])
    seed(db, LINEAGE, upstream=staged, urn=mart, transformation=None, blocked_tags=["PII"])
    seed(db, LINEAGE, upstream=mart, urn=report)
    seed(db, LINEAGE, upstream=staged, urn=extra)
    seed(db, LINEAGE, upstream=raw, urn=urn("wh", "s", "legacy"), deleted=True)
    return [raw, staged, mart, report, extra]


def test_lineage_two_levels_both_directions(client: TestClient, db: Database[dict[str, Any]], tenant: str) -> None:
    raw, staged, mart, report, extra = _chain(db)
    act_as(client, tenant, "tenant:read")
    down = client.get(f"/v1/tenants/{tenant}/assets/lineage", params={"urn": raw, "depth": 2})
    assert down.status_code == 200, down.text
    body = down.json()
    assert [(n["urn"], n["depth"], n["name"]) for n in body["nodes"]] == [
        (staged, 1, "staged"),
        (extra, 2, "extra"),
        (mart, 2, "mart"),
    ]
    assert {(e["upstream"], e["urn"]) for e in body["edges"]} == {(raw, staged), (staged, mart), (staged, extra)}
    assert [e["blocked_tags"] for e in body["edges"] if e["urn"] == mart] == [["PII"]]
    assert (body["truncated"], body["reason"]) == (True, "depth 2 reached")  # report is three hops away

    up = client.get(
        f"/v1/tenants/{tenant}/assets/lineage", params={"urn": report, "direction": "upstream", "depth": 2}
    ).json()
    assert [(n["urn"], n["depth"]) for n in up["nodes"]] == [(mart, 1), (staged, 2)]
    assert up["truncated"] is True
    whole = client.get(
        f"/v1/tenants/{tenant}/assets/lineage", params={"urn": report, "direction": "upstream", "depth": 10}
    ).json()
    assert [n["urn"] for n in whole["nodes"]] == [mart, staged, raw] and whole["truncated"] is False

    budget = client.get(f"/v1/tenants/{tenant}/assets/lineage", params={"urn": raw, "depth": 5, "max_nodes": 2})
    assert budget.json()["truncated"] is True and len(budget.json()["nodes"]) == 2
    problem(client.get(f"/v1/tenants/{tenant}/assets/lineage", params={"urn": raw, "depth": 11}), 422, "depth")
    problem(client.get(f"/v1/tenants/{tenant}/assets/lineage", params={"urn": urn("none")}), 404, "urn")


def test_incidents_by_asset_and_state_with_paging(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    orders, users = urn("wh", "s", "orders"), urn("wh", "s", "users")
    seed(db, INCIDENTS, incident_id="i-1", urn=orders, status="opened", severity="SEV-1", url="https://mc/i-1")
    seed(db, INCIDENTS, incident_id="i-2", urn=orders, status="resolved", feedback="fixed")
    seed(db, INCIDENTS, incident_id="i-3", urn=orders, status="updated", owner="bob")
    seed(db, INCIDENTS, incident_id="i-4", urn=users, status="opened")
    act_as(client, tenant, "tenant:read")
    route = f"/v1/tenants/{tenant}/assets/incidents"

    first = client.get(route, params={"urn": orders, "limit": 2}).json()
    second = client.get(route, params={"urn": orders, "limit": 2, "cursor": first["next_cursor"]}).json()
    assert [i["incident_id"] for i in first["items"]] == ["i-1", "i-2"]
    assert [i["incident_id"] for i in second["items"]] == ["i-3"] and second["next_cursor"] is None
    assert first["items"][0]["severity"] == "SEV-1" and first["items"][0]["url"] == "https://mc/i-1"
    open_ones = client.get(route, params={"state": "open"}).json()["items"]
    assert [(i["incident_id"], i["urn"]) for i in open_ones] == [("i-1", orders), ("i-3", orders), ("i-4", users)]
    assert [i["incident_id"] for i in client.get(route, params={"state": "resolved"}).json()["items"]] == ["i-2"]


def test_tag_changes_are_checked_before_anything_is_published(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    table, column = urn("wh", "s", "t"), urn("wh", "s", "t", "c")
    seed(db, ASSETS, urn=table, kind="table", name="t")
    db["propagated_tags"].insert_one({"_id": f"{column}|PII|{table}", "urn": column, "tag": "PII", "origin": table})
    route = f"/v1/tenants/{tenant}/assets/tags"
    act_as(client, tenant, "tenant:read")
    problem(client.post(route, json={"urn": table, "tag": "PII"}), 403)
    act_as(client, tenant, "tenant:admin")
    problem(client.post(route, json={"urn": urn("wh", "s", "unknown"), "tag": "PII"}), 404, "urn")
    problem(client.post(route, json={"urn": table, "tag": "not a tag"}), 422, "tag")
    problem(client.post(route, json={"urn": table, "tag": "PII", "extra": 1}), 422, "extra")
    problem(client.delete(route, params={"urn": table, "tag": "PII"}), 404, "tag")
    problem(client.delete(route, params={"urn": column, "tag": "PII"}), 409, "tag")


def test_a_tag_change_always_outranks_the_version_the_projection_holds(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    # A classification made with a later clock (another API replica, a source's own sequence) must not make a
    # person's removal stale: the API publishes past the held version, and keeps increasing from there.
    table = urn("wh", "s", "future")
    seed(db, ASSETS, urn=table, kind="table", name="future")
    far = 10**15
    db["classifications"].insert_one(
        {"_id": f"{table}|PII", "urn": table, "tag": "PII", "source": "human", "deleted": False, "version": far}
    )
    act_as(client, tenant, "tenant:admin")
    removed = client.delete(f"/v1/tenants/{tenant}/assets/tags", params={"urn": table, "tag": "PII"})
    assert removed.status_code == 202, removed.text
    assert removed.json()["version"] == far + 1
    added = client.post(f"/v1/tenants/{tenant}/assets/tags", json={"urn": table, "tag": "PII"})
    assert added.status_code == 202, added.text
    assert added.json()["version"] == far + 2


def _audit(client: TestClient, tenant: str, target: str) -> list[tuple[str, str, str, dict[str, int]]]:
    act_as(client, tenant, "tenant:admin", subject="it-auditor")
    rows = client.get(f"/v1/tenants/{tenant}/audit", params={"target": target}).json()["items"]
    return sorted((r["actor"], r["action"], r["result"], r["counts"]) for r in rows)


def test_unmasking_pii_needs_the_pii_grant_and_is_audited(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    # Issue 12, item 1: events:write alone took PII tags off (or stopped them spreading) and the SQL endpoint then
    # served the columns in clear. A PII tag (access.pii_tags) now needs pii:read or tenant:admin to weaken.
    table = urn("wh", "s", "people")
    seed(db, ASSETS, urn=table, kind="table", name="people")
    for tag in ("PII", "finance"):
        seed(db, CLASSIFICATIONS, urn=table, tag=tag, source="human", propagate=True)
    route = f"/v1/tenants/{tenant}/assets/tags"
    act_as(client, tenant, "events:write", "tenant:read", "sql:read", subject="it-writer")
    refused = problem(client.delete(route, params={"urn": table, "tag": "PII"}), 403, "tag")
    assert refused["type"].endswith("pii-grant-required")
    assert "pii:read" in refused["detail"]
    for option, value in (
        ("propagate", False),
        ("restrict_propagation_through_lineage", True),
        ("remove_propagations_on_entity_delete", True),
    ):
        problem(client.post(route, json={"urn": table, "tag": "GDPR.personal", option: value}), 403, option)
    # Tags that mask nothing, and a PII tag that spreads, need no grant.
    assert client.delete(route, params={"urn": table, "tag": "finance"}).status_code == 202
    assert client.post(route, json={"urn": table, "tag": "PII.email"}).status_code == 202
    # The grant: pii:read with events:write, or tenant:admin.
    act_as(client, tenant, "events:write", "pii:read", subject="it-pii-writer")
    assert client.delete(route, params={"urn": table, "tag": "PII"}).status_code == 202
    act_as(client, tenant, "tenant:admin", subject="it-admin")
    added = client.post(route, json={"urn": table, "tag": "GDPR.personal", "propagate": False})
    assert added.status_code == 202, added.text
    assert _audit(client, tenant, f"{table}|PII") == [
        ("it-pii-writer", "asset.tag.remove", "accepted", {"pii": 1}),
        ("it-writer", "asset.tag.remove", "refused", {"pii": 1}),
    ]
    assert _audit(client, tenant, f"{table}|GDPR.personal") == [
        ("it-admin", "asset.tag.add", "accepted", {"pii": 1}),
        *[("it-writer", "asset.tag.add", "refused", {"pii": 1})] * 3,
    ]


def test_any_spelling_of_a_urn_finds_the_asset_and_tags_go_out_canonical(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    # Issue 12, item 10: stored URNs are canonical; a person types the name as the source spells it.
    canonical = urn("shop", "public", "jane%20doe%27s%20orders")
    odd = urn("shop", "public", "jane doe's orders")
    seed(db, ASSETS, urn=canonical, kind="table", name="jane doe's orders")
    act_as(client, tenant, "tenant:admin")
    found = client.get(f"/v1/tenants/{tenant}/assets", params={"urn": odd})
    assert found.status_code == 200, found.text
    assert found.json()["urn"] == canonical
    lineage = client.get(f"/v1/tenants/{tenant}/assets/lineage", params={"urn": odd})
    assert lineage.status_code == 200, lineage.text
    assert lineage.json()["urn"] == canonical
    added = client.post(f"/v1/tenants/{tenant}/assets/tags", json={"urn": odd, "tag": "PII"})
    assert added.status_code == 202, added.text
    assert added.json()["urn"] == canonical  # the event it published names the canonical URN
    dry_run = client.post(f"/v1/tenants/{tenant}/propagation/dry-run", json={"urn": odd, "tag": "PII"})
    assert dry_run.status_code == 200, dry_run.text
    assert dry_run.json()["urn"] == canonical
    problem(client.get(f"/v1/tenants/{tenant}/assets", params={"urn": "jane doe's orders"}), 422, "urn")
    problem(client.post(f"/v1/tenants/{tenant}/assets/tags", json={"urn": "orders", "tag": "PII"}), 422, "urn")
