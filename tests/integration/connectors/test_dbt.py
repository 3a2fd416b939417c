"""The dbt connector on the real stack: the committed artifacts of tests/fixtures/dbt_project imported for a tenant
through the runtime (Kafka), their assets and lineage seen in MongoDB (the shared streaming job), and the URN rule
checked against the PostgreSQL crawler on the same relations built in the stack's PostgreSQL."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from connectors.dbt import DbtConnector
from connectors.dbt.mapping import Project, assets
from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from connectors.runtime.context import Runtime
from connectors.runtime.source_runner import crawl
from connectors.runtime.worker import build_runtime
from control.connectors.plugin import ConnectorContext, SourceAccess
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import names_for
from tests._support.itest import wait_for
from tests._support.pgit import scratch_database
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import admin_api, create_connector, tenant_admin, worker_settings

pytestmark = pytest.mark.integration

ARTIFACTS = Path(__file__).resolve().parents[2] / "fixtures" / "dbt_project" / "artifacts"
WITH_DBT = {**PLUGINS, "dbt": DbtConnector}
P = "urn:metalake:postgres:wh/dbt_jaffle"


@pytest.fixture
def artifact_root(tmp_path: Path, tenant: str) -> Path:
    folder = tmp_path / tenant / "jaffle"
    folder.mkdir(parents=True)
    for name in ("manifest.json", "catalog.json"):
        shutil.copy(ARTIFACTS / name, folder / name)
    return tmp_path


@pytest.fixture
def dbt_runtime(settings: Settings, stack: StackManager, artifact_root: Path) -> Iterator[Runtime]:
    built = build_runtime(worker_settings(settings, artifact_roots=[str(artifact_root)]), plugins=WITH_DBT)
    yield built
    built.publisher.close()
    built.offsets.close()


@pytest.fixture
def dbt_api(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    with admin_api(settings, plugins=WITH_DBT) as client:
        yield client


def test_artifacts_reach_mongodb_with_their_lineage(
    dbt_api: TestClient, dbt_runtime: Runtime, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    admin = tenant_admin(dbt_api, tenant)
    config = {"manifest": "jaffle/manifest.json", "catalog": "jaffle/catalog.json", "instance": "wh"}
    create_connector(dbt_api, admin, tenant, "dbt", type="dbt", config=config)
    report = crawl(dbt_runtime, tenant, "dbt")
    assert not report.failed
    assert report.per_kind == {"table": 6, "view": 3, "column": 43, "lineage_edge_added": 9 + 29}

    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    wait_for("the dbt assets in MongoDB", lambda: db["assets"].count_documents({}) == 52 or None, timeout_s=240)
    customers = db["assets"].find_one({"_id": f"{P}/marts/customers"})
    assert customers is not None
    assert customers["description"] == "One row per customer with their order history and lifetime value."
    assert customers["owners"] == ["finance@example.com"]
    assert customers["properties"]["dbt_tags"] == "gold"
    email = db["assets"].find_one({"_id": f"{P}/staging/stg_customers/email"})
    assert email is not None and (email["data_type"], email["description"]) == ("text", "Login e-mail address.")

    edges = db["lineage"]
    wait_for("the dbt lineage in MongoDB", lambda: edges.count_documents({}) == 9 + 29 or None, timeout_s=240)
    pairs = {(d["upstream"], d["urn"]) for d in edges.find({}, {"upstream": 1, "urn": 1})}
    assert (f"{P}/staging/stg_orders", f"{P}/marts/customers") in pairs
    assert (f"{P}/staging/stg_customers/first_name", f"{P}/marts/customers/full_name") in pairs
    assert (f"{P}/staging/stg_customers/last_name", f"{P}/marts/customers/full_name") in pairs
    assert (f"{P}/raw/payments/amount", f"{P}/staging/stg_payments/amount") in pairs

    # A second import of the same artifacts emits nothing.
    again = crawl(dbt_runtime, tenant, "dbt")
    assert not again.failed and sum(t.records for t in again.tasks) == 0


def _ddl(catalog: dict[str, Any]) -> str:
    """The relations dbt built, as tables (views too: only names and columns matter here), from catalog.json."""
    out = []
    for node in [*catalog["nodes"].values(), *catalog["sources"].values()]:
        meta = node["metadata"]
        columns = sorted(node["columns"].values(), key=lambda c: c["index"])
        cols = ", ".join(f'"{c["name"]}" {c["type"]}' for c in columns)
        schema, name = meta["schema"], meta["name"]
        out.append(f'CREATE SCHEMA IF NOT EXISTS "{schema}"; CREATE TABLE "{schema}"."{name}" ({cols});')
    return "\n".join(out)


def test_dbt_urns_are_the_crawlers_for_the_same_relations(settings: Settings, stack: StackManager) -> None:
    catalog = json.loads((ARTIFACTS / "catalog.json").read_text())
    manifest = json.loads((ARTIFACTS / "manifest.json").read_text())
    with scratch_database(settings, _ddl(catalog)) as database:
        config = PostgresCatalogConfig(
            host="127.0.0.1", port=settings.stack.ports.postgres, user="metalake", password="unused-trust",
            instance="wh", databases=[database], sslmode="disable",  # the stack's PostgreSQL has no TLS
        )  # fmt: skip
        access = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]), allow_passwordless=True)
        crawler = PostgresCatalogConnector(config, ConnectorContext("acme", "pg", access=access))
        crawled = {r.event.data["urn"] for r in crawler.poll({}) if r.event.type.endswith("upserted.v1")}
    # The crawler knows this database under its scratch name: the dbt connector's databases map says so.
    project = Project(manifest, catalog, "postgres", "wh", {"dbt_jaffle": database})
    described = set()
    for asset in assets(project):
        described |= {asset.urn, *(f"{asset.urn}/{c.name}" for c in asset.columns)}
        described |= {u for edges in asset.column_edges.values() for u, _ in edges}
    assert len(described) == 52
    assert described <= crawled
