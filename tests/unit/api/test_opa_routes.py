"""The OPA decision endpoints (api/routes/engines.py) over HTTP: the decisions they answer, the per-address throttle
before the key check, the bounded batches."""

from __future__ import annotations

from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient

from api.routes.engines import router
from api.services.enforcement import CatalogSource, EngineStore
from catalog import urn_keys
from control.auth.settings import EnforcementSettings
from ops.settings import Settings
from tenants.naming import CONTROL_DATABASE, names_for
from tests._support.mongo_list import FakeDatabase

SOURCE = CatalogSource("warehouse", "postgres", "shop-prod", "shop")


class _Client(dict[str, FakeDatabase]):
    def __missing__(self, name: str) -> FakeDatabase:
        self[name] = FakeDatabase()
        return self[name]


class _Ctx:
    def __init__(self, settings: Settings) -> None:
        self.settings, self.mongo = settings, _Client()


def _app(**limits: Any) -> tuple[TestClient, str]:
    app = FastAPI()
    app.include_router(router)
    ctx = _Ctx(Settings(enforcement=EnforcementSettings(**limits)))
    app.state.ctx = ctx
    store = EngineStore(ctx.mongo[CONTROL_DATABASE])  # type: ignore[arg-type]
    _, key = store.create(
        "acme", name="t", catalogs=[SOURCE], pii_users=["dpo"], impersonators=["superset"], consent_tag="consent"
    )
    return TestClient(app), key.get_secret_value()


def _body(user: str, operation: str, **action: Any) -> dict[str, Any]:
    return {
        "input": {"context": {"identity": {"user": user, "groups": []}}, "action": {"operation": operation, **action}}
    }


def test_allow_refuses_impersonating_a_pii_user_and_a_pass_through_function() -> None:
    http, key = _app()
    impersonate = _body("superset", "ImpersonateUser", resource={"user": {"user": "dpo"}})
    assert http.post(f"/v1/opa/{key}/allow", json=impersonate).json() == {"result": False}
    ok = _body("superset", "ImpersonateUser", resource={"user": {"user": "analyst"}})
    assert http.post(f"/v1/opa/{key}/allow", json=ok).json() == {"result": True}
    fn = {"function": {"catalogName": "warehouse", "schemaName": "system", "functionName": "query"}}
    assert http.post(f"/v1/opa/{key}/allow", json=_body("analyst", "ExecuteFunction", resource=fn)).json() == {
        "result": False
    }
    queries = _body(
        "analyst", "FilterViewQueryOwnedBy", filterResources=[{"user": {"user": "dpo"}}, {"user": {"user": "analyst"}}]
    )
    assert http.post(f"/v1/opa/{key}/batch", json=queries).json() == {"result": [1]}


def test_unknown_keys_are_throttled_per_address_before_they_are_checked() -> None:
    http, key = _app(peer_rate_per_s=0.001, peer_burst=3)
    body = _body("analyst", "ExecuteQuery")
    assert http.post(f"/v1/opa/{key}/allow", json=body).status_code == 200  # checked: one token
    answers = [http.post(f"/v1/opa/mle_0123456789abcdef_junk{i}/allow", json=body) for i in range(3)]
    assert [a.status_code for a in answers] == [401, 401, 429]
    assert answers[2].headers["Retry-After"] and "junk" not in answers[2].text
    # The real engine's key, known valid, is still served (not charged, not evicted by the junk).
    assert http.post(f"/v1/opa/{key}/allow", json=body).json() == {"result": True}


def test_batches_are_bounded() -> None:
    http, key = _app(max_batch_resources=3, max_tables_per_request=1)
    tables = [{"table": {"catalogName": "warehouse", "schemaName": "s", "tableName": str(i)}} for i in range(4)]
    refused = http.post(f"/v1/opa/{key}/batch", json=_body("a", "FilterTables", filterResources=tables))
    assert refused.status_code == 400 and refused.json()["field"] == "input/action/filterResources"
    column = {"catalogName": "warehouse", "schemaName": "s", "columnName": "c", "columnType": "varchar"}
    two = [{"column": {**column, "tableName": t}} for t in ("a", "b")]
    masks = http.post(f"/v1/opa/{key}/column-masks", json=_body("a", "GetColumnMask", filterResources=two))
    assert masks.status_code == 400 and "at most 1 tables" in masks.json()["detail"]


def test_the_row_filter_references_only_columns_trino_listed(  # issue 21, item 3
) -> None:
    http, key = _app()
    ctx = http.app.state.ctx  # type: ignore[attr-defined]
    tenant_db = ctx.mongo[names_for("acme", ctx.settings.lake_root).mongo_database]
    table = SOURCE.table_urn("public", "people")
    for column in ("consent", "ghost"):
        tenant_db["classifications"].insert_one({"_id": column, "urn": f"{table}/{column}", "tag": "consent"})
    ref = {"catalogName": "warehouse", "schemaName": "public", "tableName": "people"}
    filters = _body("analyst", "GetRowFilters", resource={"table": ref})
    # Not yet listed by Trino (another API process served the masks): every consent-tagged column is named.
    assert len(http.post(f"/v1/opa/{key}/row-filters", json=filters).json()["result"]) == 2
    columns = [{"column": {**ref, "columnName": c, "columnType": "varchar"}} for c in ("id", "consent")]
    masks = http.post(f"/v1/opa/{key}/column-masks", json=_body("analyst", "GetColumnMask", filterResources=columns))
    assert masks.status_code == 200
    answer = http.post(f"/v1/opa/{key}/row-filters", json=filters).json()
    assert answer == {"result": [{"expression": 'coalesce(try_cast("consent" AS boolean), false)'}]}


def test_a_batch_of_twenty_tables_is_one_exact_tag_query_per_collection(  # issue 21, item 12
) -> None:
    http, key = _app(max_tables_per_request=20)
    ctx = http.app.state.ctx  # type: ignore[attr-defined]
    tenant_db = ctx.mongo[names_for("acme", ctx.settings.lake_root).mongo_database]
    # The source spells its names with capitals; Trino reports them lower-cased.
    stored = CatalogSource("warehouse", "postgres", "Shop-Prod", "Shop")
    for t in range(20):
        urn = f"{stored.table_urn('Public', f'People{t}')}/Email"
        doc = {"_id": f"{urn}|PII", "urn": urn, "tag": "PII", "deleted": False}
        tenant_db["classifications"].insert_one({**doc, "urn_keys": urn_keys.urn_keys(urn)})
    urn_keys.backfill(tenant_db)  # nothing left to set: records that every document has its keys
    ref = {"catalogName": "warehouse", "schemaName": "public", "columnType": "varchar"}
    columns = [
        {"column": {**ref, "tableName": f"people{t}", "columnName": c}}
        for t in range(20)
        for c in ("email", *(f"c{i}" for i in range(9)))
    ]
    before = {name: len(tenant_db[name].queries) for name in urn_keys.COLLECTIONS}
    masks = http.post(f"/v1/opa/{key}/column-masks", json=_body("analyst", "GetColumnMask", filterResources=columns))
    assert [m["index"] for m in masks.json()["result"]] == list(range(0, 200, 10))  # every table's email
    for name in urn_keys.COLLECTIONS:
        sent = tenant_db[name].queries[before[name] :]
        assert len(sent) == 1 and "$in" in sent[0]["urn_keys"] and "$regex" not in str(sent)
