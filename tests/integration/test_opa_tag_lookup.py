"""The OPA decisions' tag lookups on the real FerretDB (issue 21, item 12): tags written by the projection's own code
(``spec_upsert`` + ``apply_upserts``) under URNs spelled with capitals, asked about by the batch endpoint with the
lower-cased names Trino reports, 20 tables in one request; a document written before ``urn_keys`` existed is found
the old way until the backfill, and by its keys after; the lookup's equality is pushed down to PostgreSQL."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from pymongo.database import Database

from api.app import create_app
from api.services.enforcement import CatalogSource, EngineStore
from catalog import urn_keys
from ops.settings import Settings
from ops.stack.manager import StackManager
from processors.enrichment.projection import apply_upserts, spec_upsert
from processors.enrichment.state import CLASSIFICATIONS
from tenants.naming import CONTROL_DATABASE, names_for
from tests._support.tokens import api_settings

pytestmark = pytest.mark.integration

SOURCE = CatalogSource("warehouse", "postgres", "shop-prod", "shop")  # as the engine maps it, in Trino's case
STORED = CatalogSource("warehouse", "postgres", "Shop-Prod", "Shop")  # as the source spells it
TABLES = 20


@pytest.fixture
def opa(
    settings: Settings, stack: StackManager, mongo: MongoClient[dict[str, Any]], tenant: str
) -> Iterator[tuple[TestClient, str, Database[dict[str, Any]]]]:
    app_settings = api_settings(settings)
    app_settings.enforcement.max_tables_per_request = TABLES
    app_settings.enforcement.cache_ttl_s = 0.0  # every request reads MongoDB
    store = EngineStore(mongo[CONTROL_DATABASE])
    engine, key = store.create(tenant, name="it", catalogs=[SOURCE], pii_users=["dpo"])
    database = names_for(tenant, settings.lake_root).mongo_database
    try:
        yield TestClient(create_app(app_settings, mongo=mongo)), key.get_secret_value(), mongo[database]
    finally:
        store.delete(tenant, engine.engine_id)
        mongo.drop_database(database)


def _row(urn: str, version: int) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(CLASSIFICATIONS.columns)
    now = datetime.now(UTC)
    return {**row, "urn": urn, "tag": "PII", "deleted": False, "version": version, "event_id": "e", "updated_at": now}


def _masks(http: TestClient, key: str, user: str = "analyst") -> list[int]:
    ref = {"catalogName": "warehouse", "schemaName": "public", "columnType": "varchar"}
    columns = [
        {"column": {**ref, "tableName": f"people{t}", "columnName": c}}
        for t in range(TABLES)
        for c in ("id", "email", "phone", *(f"c{i}" for i in range(7)))
    ]
    action = {"operation": "GetColumnMask", "filterResources": columns}
    body = {"input": {"context": {"identity": {"user": user, "groups": []}}, "action": action}}
    answer = http.post(f"/v1/opa/{key}/column-masks", json=body)
    assert answer.status_code == 200, answer.text
    return [m["index"] for m in answer.json()["result"]]


def test_the_batch_endpoint_masks_tables_whose_urns_differ_in_case(
    opa: tuple[TestClient, str, Database[dict[str, Any]]],
) -> None:
    http, key, db = opa
    urns = [f"{STORED.table_urn('Public', f'People{t}')}/Email" for t in range(TABLES)]
    applied, stale = apply_upserts(db["classifications"], [spec_upsert(CLASSIFICATIONS)(_row(u, 1)) for u in urns])
    assert (applied, stale) == (TABLES, 0)
    assert db["classifications"].find_one({"_id": f"{urns[0]}|PII"})["urn_keys"] == urn_keys.urn_keys(urns[0])  # type: ignore[index]
    # Written by the job before the field existed: no urn_keys.
    legacy = f"{STORED.table_urn('Public', 'People0')}/PHONE"
    db["classifications"].insert_one({"_id": f"{legacy}|PII", "urn": legacy, "tag": "PII", "deleted": False})
    expected = sorted([10 * t + 1 for t in range(TABLES)] + [2])  # every table's email, and table 0's phone
    assert _masks(http, key) == expected  # before the backfill: the old regex lookups, the legacy document found
    assert urn_keys.backfill(db) == 1 and urn_keys.ready(db)
    assert db["classifications"].find_one({"_id": f"{legacy}|PII"})["urn_keys"] == urn_keys.urn_keys(legacy)  # type: ignore[index]
    assert _masks(http, key) == expected  # after: exact lookups on urn_keys
    assert _masks(http, key, user="dpo") == []
    assert urn_keys.backfill(db) == 0  # idempotent


def test_the_lookup_of_a_table_is_pushed_down_on_ferretdb(
    opa: tuple[TestClient, str, Database[dict[str, Any]]],
) -> None:
    _, _, db = opa
    urn = f"{STORED.table_urn('Public', 'People')}/Email"
    apply_upserts(db["classifications"], [spec_upsert(CLASSIFICATIONS)(_row(urn, 1))])
    # The stack runs FerretDB: $in would be filtered after reading the collection, so each table is an equality.
    assert not urn_keys.in_served_by_index(db)
    query = {"urn_keys": urn_keys.normalised(SOURCE.table_urn("public", "people")), "deleted": {"$ne": True}}
    plan = db.command({"explain": {"find": "classifications", "filter": query}})
    assert plan["filterPushdown"] is True
    assert "-> 'urn_keys'::text) @>" in json.dumps(plan["queryPlanner"])
    assert [d["urn"] for d in db["classifications"].find(query)] == [urn]
