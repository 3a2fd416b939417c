"""``POST /v1/tenants/{tenant}/propagation/dry-run`` on the real FerretDB with real access tokens.

The projection is seeded with the streaming job's own projection code (``spec_upsert`` + ``apply_upserts``), so the
route reads exactly the shapes the job writes, tombstones included.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from pymongo.database import Database

from api.app import create_app
from catalog.propagation.dry_run import dry_run
from catalog.propagation.graph import Limits
from catalog.propagation.store import TooLarge, load_reachable, load_tenant
from catalog.propagation.tenant import TenantPropagation
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.state import ASSETS, CLASSIFICATIONS, LINEAGE
from tenants.naming import names_for
from tests._support.stateseed import seed
from tests._support.tokens import auth_headers

pytestmark = pytest.mark.integration


def col(table: str) -> str:
    return f"urn:metalake:postgres:prod/shop/public/{table}/email"


@pytest.fixture
def db(mongo: MongoClient[dict[str, Any]], settings: Settings, tenant: str) -> Iterator[Database[dict[str, Any]]]:
    database = mongo[names_for(tenant, settings.lake_root).mongo_database]
    # users -> customers -> report, users -> hashed (blocks PII), customers -> gone (deleted), an edge removed
    seed(database, LINEAGE, upstream=col("users"), urn=col("customers"))
    seed(database, LINEAGE, upstream=col("customers"), urn=col("report"))
    seed(database, LINEAGE, upstream=col("users"), urn=col("hashed"), blocked_tags=["PII"])
    seed(database, LINEAGE, upstream=col("customers"), urn=col("gone"))
    seed(database, ASSETS, urn=col("gone"), deleted=True)
    seed(database, LINEAGE, upstream=col("users"), urn=col("old"), deleted=True)
    seed(database, CLASSIFICATIONS, urn=col("report"), tag="PII", source="human", propagate=True)
    yield database
    mongo.drop_database(database.name)


@pytest.fixture
def client(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    with TestClient(create_app(settings, mongo=mongo)) as test_client:
        yield test_client
    mongo.close()


def test_dry_run_answers_what_the_tag_would_reach(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    headers = auth_headers(client, tenant=tenant, role="read-only")
    before = {name: list(db[name].find({}, {"_id": 1, "version": 1})) for name in db.list_collection_names()}
    response = client.post(
        f"/v1/tenants/{tenant}/propagation/dry-run", json={"urn": col("users"), "tag": "PII"}, headers=headers
    )
    assert response.status_code == 200, response.text
    assert response.json() == {
        "urn": col("users"),
        "tag": "PII",
        "count": 2,
        "max_depth": 2,
        "truncated": False,
        "reason": None,
        "listed": 2,
        "reached": [
            {"urn": col("customers"), "path": [col("users"), col("customers")], "depth": 1, "already_tagged": False},
            {
                "urn": col("report"),
                "path": [col("users"), col("customers"), col("report")],
                "depth": 2,
                "already_tagged": True,
            },
        ],
    }
    # Another tag is not blocked by the hashing step.
    other = client.post(
        f"/v1/tenants/{tenant}/propagation/dry-run",
        json={"urn": col("users"), "tag": "GDPR", "max_depth": 1, "limit": 1},
        headers=headers,
    ).json()
    assert (other["count"], other["listed"], other["truncated"], other["reason"]) == (2, 1, True, "max_depth")
    assert [r["urn"] for r in other["reached"]] == [col("customers")]
    after = {name: list(db[name].find({}, {"_id": 1, "version": 1})) for name in db.list_collection_names()}
    assert after == before  # a dry run changes nothing


def test_dry_run_refuses_bad_input_naming_the_field(
    client: TestClient, db: Database[dict[str, Any]], tenant: str
) -> None:
    headers = auth_headers(client, tenant=tenant, role="read-only")
    for body, field in (
        ({"urn": "not-a-urn", "tag": "PII"}, "urn"),
        ({"urn": col("users"), "tag": "has space"}, "tag"),
        ({"urn": col("users"), "tag": "PII", "max_depth": 0}, "max_depth"),
    ):
        response = client.post(f"/v1/tenants/{tenant}/propagation/dry-run", json=body, headers=headers)
        assert response.status_code == 422, response.text
        assert response.headers["content-type"].startswith("application/problem+json")
        assert field in response.text


def test_dry_run_is_scoped_to_the_callers_tenant(client: TestClient, db: Database[dict[str, Any]], tenant: str) -> None:
    body = {"urn": col("users"), "tag": "PII"}
    assert client.post(f"/v1/tenants/{tenant}/propagation/dry-run", json=body).status_code == 401
    stranger = auth_headers(client, tenant="it-someone-else", role="admin")
    response = client.post(f"/v1/tenants/{tenant}/propagation/dry-run", json=body, headers=stranger)
    assert response.status_code == 404
    admin = auth_headers(client, platform_admin=True)
    assert client.post(f"/v1/tenants/{tenant}/propagation/dry-run", json=body, headers=admin).json()["count"] == 2


def test_the_dry_run_reads_only_the_lineage_within_its_reach(db: Database[dict[str, Any]], tenant: str) -> None:
    # A large component the dry-run from users cannot reach, and edges that carry tags upstream or both ways.
    for i in range(200):
        seed(db, LINEAGE, upstream=col(f"far{i}"), urn=col(f"far{i + 1}"))
    seed(db, LINEAGE, upstream=col("source"), urn=col("report"), propagation="upstream")
    seed(db, LINEAGE, upstream=col("report"), urn=col("archive"), propagation="both")
    seed(db, LINEAGE, upstream=col("sink"), urn=col("archive"), propagation="none")
    seed(db, CLASSIFICATIONS, urn=col("far3"), tag="PII", source="human", propagate=True)
    limits = Limits(max_depth=10)
    state = load_reachable(db, tenant, col("users"), "PII", limits, max_edges=1000)
    loaded = set(_edges(state))
    assert loaded == {
        (col("users"), col("customers")),
        (col("users"), col("hashed")),  # blocks PII, but another tag would cross it: the walk decides
        (col("customers"), col("report")),
        (col("customers"), col("gone")),
        (col("source"), col("report")),  # carries tags from report up to source
        (col("report"), col("archive")),
    }
    assert set(state.tags_on) <= {col("report")} and col("gone") in state.deleted_assets
    # The same answers as over the whole tenant, for every origin, tag and depth tried.
    whole = load_tenant(db, tenant, limits)
    for origin in (col("users"), col("customers"), col("archive"), col("far0"), col("nowhere")):
        for tag in ("PII", "GDPR"):
            for depth in (1, 2, 10):
                bounded = Limits(max_depth=depth)
                part = load_reachable(db, tenant, origin, tag, bounded, max_edges=1000)
                assert dry_run(part, origin, tag, bounded) == dry_run(whole, origin, tag, bounded), (origin, tag, depth)
    # The budget counts the edges read: the whole chain from far0 is 200 of them.
    deep = Limits(max_depth=500)
    assert len(load_reachable(db, tenant, col("far0"), "PII", deep, max_edges=200).edge_stamps) == 200
    with pytest.raises(TooLarge):
        load_reachable(db, tenant, col("far0"), "PII", deep, max_edges=199)


def _edges(state: TenantPropagation) -> list[tuple[str, str]]:
    return sorted(state.edge_stamps)


def test_a_dry_run_over_its_edge_budget_is_422_naming_max_depth(
    settings: Settings, stack: StackManager, db: Database[dict[str, Any]], tenant: str
) -> None:
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    for budget, status in ((3, 422), (4, 200)):
        copy = settings.model_copy(deep=True)
        copy.propagation.dry_run_max_edges = budget
        with TestClient(create_app(copy, mongo=mongo)) as client:
            headers = auth_headers(client, tenant=tenant, role="read-only")
            response = client.post(
                f"/v1/tenants/{tenant}/propagation/dry-run", json={"urn": col("users"), "tag": "PII"}, headers=headers
            )
        assert response.status_code == status, response.text
        if status == 422:
            assert response.headers["content-type"].startswith("application/problem+json")
            assert response.json()["type"].endswith("/dry-run-too-large") and response.json()["field"] == "max_depth"
        else:
            assert response.json()["count"] == 2
    mongo.close()
