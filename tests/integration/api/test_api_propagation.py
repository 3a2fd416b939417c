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
from stateseed import seed
from tokens import auth_headers

from api.app import create_app
from metalake.settings import Settings
from ops.stack import StackManager
from processors.enrichment.state import ASSETS, CLASSIFICATIONS, LINEAGE
from tenants.naming import names_for

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
