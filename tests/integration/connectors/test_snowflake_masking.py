"""Snowflake masking policies from PII tags on the real stack.

End to end: a Snowflake table and its columns, and a PII tag, published through the ingest API (write key) -> Kafka
-> the shared stream job -> MongoDB -> ``GET .../masking/snowflake`` (a tenant reader's token) and ``metalake
masking snowflake-policies`` give a script masking the column; the tag removed through the admin API, the next
script unsets it. And the projection reader against FerretDB: propagated tags, table tags, tombstones, deleted
assets, seeded with the job's own upserts.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient
from pymongo.database import Database
from typer.testing import CliRunner

from control.snowflake.blocks import BASE_TYPES
from control.snowflake.inventory import TooManyColumns, load_inventory
from metalake.urn import asset_urn
from ops.cli.masking import app as masking_cli
from ops.settings import Settings
from processors.enrichment.state import ASSETS, CLASSIFICATIONS, PROPAGATED
from tenants.naming import names_for
from tests._support.itest import wait_for
from tests._support.snowsql import statements
from tests._support.stateseed import seed
from tests._support.tokens import auth_headers
from tests._support.worker_helpers import tenant_admin

pytestmark = pytest.mark.integration

ACCOUNT = "xy12345.eu-central-1"
TABLE = asset_urn("snowflake", ACCOUNT, "SHOP", "PUBLIC", "CUSTOMERS")
EMAIL = TABLE + "/EMAIL"
NAME = asset_urn("snowflake", ACCOUNT, "SHOP", "PUBLIC", "CUSTOMERS", 'Full "Name"')
# Each column's statement is a block that checks Snowflake first (control/snowflake/blocks.py); these are its ALTERs.
SET_EMAIL = (
    """EXECUTE IMMEDIATE 'ALTER TABLE IF EXISTS "SHOP"."PUBLIC"."CUSTOMERS" MODIFY COLUMN "EMAIL" """
    """SET MASKING POLICY '"""
)
UNSET_EMAIL = 'ALTER TABLE IF EXISTS "SHOP"."PUBLIC"."CUSTOMERS" MODIFY COLUMN "EMAIL" UNSET MASKING POLICY;'


def _event(tenant: str, i: int, type_: str, data: dict[str, Any]) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"snowflake-{i}",
        "source": "/producers/snowflake-it",
        "type": type_,
        "tenantid": tenant,
        "data": {"version": 1, **data},
    }


def test_a_pii_column_ingested_is_masked_by_the_script_and_unset_once_untagged(
    worker: TestClient, api: TestClient, settings: Settings, tenant: str, tmp_path: Path
) -> None:
    admin = tenant_admin(api, tenant)
    created = api.post(f"/v1/tenants/{tenant}/write-keys", headers=admin)
    assert created.status_code == 201, created.text
    upsert = "io.metalake.asset.upserted.v1"
    events = [
        _event(tenant, 1, upsert, {"urn": TABLE, "kind": "table", "name": "CUSTOMERS"}),
        _event(tenant, 2, upsert, {"urn": EMAIL, "kind": "column", "name": "EMAIL", "data_type": "VARCHAR(256)"}),
        _event(tenant, 3, upsert, {"urn": NAME, "kind": "column", "name": 'Full "Name"', "data_type": "TEXT"}),
        _event(tenant, 4, "io.metalake.classification.added.v1", {"urn": EMAIL, "tag": "PII", "source": "human"}),
        _event(tenant, 5, "io.metalake.classification.added.v1", {"urn": NAME, "tag": "PII.name", "source": "auto"}),
    ]
    response = worker.post("/v1/events", json=events, headers={"Authorization": f"Bearer {created.json()['key']}"})
    assert response.status_code == 200, response.text
    assert response.json()["accepted"] == len(events), response.text

    reader = auth_headers(api, tenant=tenant, role="read-only")
    route = f"/v1/tenants/{tenant}/masking/snowflake"

    def script_once(want: str) -> str | None:
        answer = api.get(route, params={"role": ["PII_READER"]}, headers=reader)
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("application/sql")
        return answer.text if want in answer.text else None

    # The shared job may be catching up on a backlog (after a restart): the first wait is long.
    sql = wait_for("both columns in the script", lambda: script_once("2 column(s) to mask"), timeout_s=300)
    assert SET_EMAIL in sql
    assert 'MODIFY COLUMN "Full ""Name""" SET MASKING POLICY \' || chosen_policy' in sql  # the name quoted
    assert "IS_ROLE_IN_SESSION('PII_READER')" in sql
    assert len(statements(sql)) == 2 * len(BASE_TYPES) + 2  # the allowlist's policies (create, set body), 2 blocks

    # The operator's CLI gives the same script (its settings: the stack's, from METALAKE_ENV_FILE).
    out = tmp_path / "masks.sql"
    run = CliRunner().invoke(
        masking_cli, ["snowflake-policies", "--tenant", tenant, "--role", "PII_READER", "--output", str(out)]
    )
    assert run.exit_code == 0, run.output
    assert out.read_text() == sql
    assert "2 column(s) masked" in run.output

    # The tag removed (a tenant admin may remove PII tags): the next script unsets that column, masks the other.
    removed = api.delete(f"/v1/tenants/{tenant}/assets/tags", params={"urn": EMAIL, "tag": "PII"}, headers=admin)
    assert removed.status_code == 202, removed.text
    after = wait_for("the email column unset", lambda: script_once(UNSET_EMAIL))
    assert SET_EMAIL not in after
    assert "1 column(s) to mask, 1 to unset" in after


def test_the_route_is_the_tenants_and_refuses_bad_input_as_problems(
    api: TestClient, tenant: str, db: Database[dict[str, Any]]
) -> None:
    for account in (ACCOUNT, "other"):
        seed(db, ASSETS, urn=col("T", "C", account=account), kind="column", name="C", data_type="VARCHAR")
        seed(db, CLASSIFICATIONS, urn=col("T", "C", account=account), tag="PII")
    route = f"/v1/tenants/{tenant}/masking/snowflake"
    assert api.get(route).status_code == 401
    stranger = auth_headers(api, tenant="it-someone-else", role="admin")
    assert api.get(route, headers=stranger).status_code == 404
    reader = auth_headers(api, tenant=tenant, role="read-only")
    for params, field in (({"role": "bad\nrole"}, "role"), ({"mask": "blur"}, "mask"), ({"scope": "x"}, "scope")):
        answer = api.get(route, params=params, headers=reader)
        assert answer.status_code == 422, answer.text
        assert answer.headers["content-type"].startswith("application/problem+json")
        assert field in answer.text
    several = api.get(route, headers=reader)
    assert several.status_code == 422
    assert several.headers["content-type"].startswith("application/problem+json")
    assert (several.json()["field"], several.json()["accounts"]) == ("account", ["other", ACCOUNT])
    one = api.get(route, params={"account": "other"}, headers=reader)
    assert one.status_code == 200 and one.headers["x-metalake-masked-columns"] == "1"
    assert """'ALTER TABLE IF EXISTS "SHOP"."PUBLIC"."T" MODIFY COLUMN "C" SET MASKING POLICY '""" in one.text


@pytest.fixture
def db(mongo: MongoClient[dict[str, Any]], settings: Settings, tenant: str) -> Iterator[Database[dict[str, Any]]]:
    database = mongo[names_for(tenant, settings.lake_root).mongo_database]
    yield database
    mongo.drop_database(database.name)


def col(table: str, column: str, account: str = ACCOUNT) -> str:
    return asset_urn("snowflake", account, "SHOP", "PUBLIC", table, column)


def test_the_reader_masks_propagated_and_table_tags_and_unsets_withdrawn_ones(db: Database[dict[str, Any]]) -> None:
    for table, column, data_type in (
        ("ORDERS", "EMAIL", "VARCHAR"),  # propagated PII along lineage
        ("ORDERS", "TOTAL", "NUMBER(10,2)"),  # GDPR tag withdrawn: unset
        ("USERS", "ID", "NUMBER"),  # the table is tagged: every column masked
        ("USERS", "BORN", "DATE"),
        ("OLD", "SSN", "VARCHAR"),  # its column asset deleted: left alone
        ("ORDERS", "NOTE", "VARCHAR"),  # a tag that is not PII
    ):
        seed(db, ASSETS, urn=col(table, column), kind="column", name=column, data_type=data_type)
    seed(db, ASSETS, urn=col("OLD", "SSN"), deleted=True)
    # A view (dbt and OpenLineage say so in the asset's kind): its columns take ALTER VIEW.
    seed(db, ASSETS, urn=col("ORDERS", "EMAIL").rsplit("/", 1)[0], kind="view", name="ORDERS")
    upstream = asset_urn("postgres", "prod", "shop", "public", "users", "email")
    seed(db, PROPAGATED, urn=col("ORDERS", "EMAIL"), tag="PII", origin=upstream, path=[upstream], depth=1)
    seed(db, CLASSIFICATIONS, urn=col("ORDERS", "TOTAL"), tag="GDPR.finance", deleted=True)
    seed(db, CLASSIFICATIONS, urn=asset_urn("snowflake", ACCOUNT, "SHOP", "PUBLIC", "USERS"), tag="PII")
    seed(db, CLASSIFICATIONS, urn=col("OLD", "SSN"), tag="PII")
    seed(db, CLASSIFICATIONS, urn=col("ORDERS", "NOTE"), tag="finance")
    seed(db, CLASSIFICATIONS, urn=col("T", "C", account="other"), tag="PII")  # another account
    seed(db, CLASSIFICATIONS, urn=asset_urn("postgres", "prod", "shop", "public", "t", "c"), tag="PII")

    patterns = ("PII", "PII.*", "GDPR", "GDPR.*")
    inventory = load_inventory(db, patterns=patterns, account=ACCOUNT, max_columns=100)
    assert [(c.table, c.column, c.data_type, c.view) for c in inventory.masked] == [
        ("ORDERS", "EMAIL", "VARCHAR", True),
        ("USERS", "BORN", "DATE", False),
        ("USERS", "ID", "NUMBER", False),
    ]
    assert [(c.table, c.column, c.view) for c in inventory.unmasked] == [("ORDERS", "TOTAL", True)]
    everywhere = load_inventory(db, patterns=patterns, max_columns=100)
    assert {c.account for c in everywhere.masked} == {ACCOUNT, "other"}
    with pytest.raises(TooManyColumns):
        load_inventory(db, patterns=patterns, account=ACCOUNT, max_columns=2)
