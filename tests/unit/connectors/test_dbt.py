"""The dbt connector on the committed artifacts of tests/fixtures/dbt_project (compiled by real dbt-core 1.11 and
dbt-postgres against PostgreSQL: manifest v12, catalog v1): assets, columns, owners, tags, meta, table and column
lineage, reruns, changes, and what it refuses (paths outside the tenant's folder, unknown schema versions)."""

from __future__ import annotations

import copy
import json
import logging
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from connectors.dbt import DbtConfig, DbtConnector
from connectors.dbt.artifacts import ArtifactError, check_version
from connectors.dbt.mapping import Counts, Project, assets
from control.connectors.plugin import ConnectorContext, SourceAccess, SourceRecord, partition_key
from metalake.events import decode_record

ARTIFACTS = Path(__file__).resolve().parents[2] / "fixtures" / "dbt_project" / "artifacts"
MANIFEST = json.loads((ARTIFACTS / "manifest.json").read_text())
CATALOG = json.loads((ARTIFACTS / "catalog.json").read_text())
P = "urn:metalake:postgres:wh/dbt_jaffle"


def _project(manifest: Mapping[str, Any] = MANIFEST, catalog: Mapping[str, Any] = CATALOG, **kw: Any) -> Project:
    return Project(manifest, catalog, "postgres", "wh", kw.pop("databases", {}), **kw)


def _by_id(project: Project) -> dict[str, Any]:
    return {a.unique_id: a for a in assets(project)}


def test_the_artifacts_are_the_current_schema_versions() -> None:
    assert check_version(MANIFEST, "manifest") == "v12"
    assert check_version(CATALOG, "catalog") == "v1"
    with pytest.raises(ArtifactError, match="unsupported-version"):
        check_version(
            {"metadata": {"dbt_schema_version": "https://schemas.getdbt.com/dbt/manifest/v9.json"}}, "manifest"
        )
    with pytest.raises(ArtifactError, match="unsupported-version"):
        check_version({"metadata": {}}, "catalog")


def test_models_seeds_snapshots_and_sources_with_their_relation_urns() -> None:
    found = _by_id(_project())
    assert {k: (a.urn, a.kind) for k, a in found.items()} == {
        "model.jaffle.customers": (f"{P}/marts/customers", "table"),
        "model.jaffle.orders": (f"{P}/marts/orders", "table"),
        "model.jaffle.stg_customers": (f"{P}/staging/stg_customers", "view"),
        "model.jaffle.stg_orders": (f"{P}/staging/stg_orders", "view"),
        "model.jaffle.stg_payments": (f"{P}/staging/stg_payments", "view"),
        "seed.jaffle.raw_customers": (f"{P}/raw/raw_customers", "table"),
        "seed.jaffle.raw_orders": (f"{P}/raw/raw_orders", "table"),
        "snapshot.jaffle.customers_snapshot": (f"{P}/snapshots/customers_snapshot", "table"),
        "source.jaffle.payments_app.payments": (f"{P}/raw/payments", "table"),
    }
    # A databases map renames dbt's database to the one the warehouse crawler uses.
    renamed = _by_id(_project(databases={"dbt_jaffle": "analytics"}))
    assert renamed["model.jaffle.orders"].urn == "urn:metalake:postgres:wh/analytics/marts/orders"


def test_descriptions_owners_tags_and_meta() -> None:
    found = _by_id(_project())
    customers = found["model.jaffle.customers"]
    assert customers.description == "One row per customer with their order history and lifetime value."
    assert customers.owners == ["finance@example.com"]  # the group's owner
    assert customers.properties["dbt_tags"] == "gold"
    assert customers.properties["meta_tier"] == "1"
    assert customers.properties["dbt_group"] == "finance"
    assert customers.properties["dbt_materialized"] == "table"
    assert found["source.jaffle.payments_app.payments"].owners == ["payments@example.com"]  # the source's meta
    assert found["seed.jaffle.raw_customers"].owners == ["shop-team@example.com"]
    assert found["model.jaffle.stg_orders"].owners == []
    email = next(c for c in found["model.jaffle.stg_customers"].columns if c.name == "email")
    assert (email.description, email.data_type, email.properties) == (
        "Login e-mail address.",
        "text",
        {"dbt_tags": "pii"},
    )


def test_columns_in_the_catalog_order_with_its_types() -> None:
    customers = _by_id(_project())["model.jaffle.customers"]
    assert [(c.name, c.data_type) for c in customers.columns] == [
        ("customer_id", "integer"),
        ("full_name", "text"),
        ("first_order", "date"),
        ("number_of_orders", "bigint"),
        ("lifetime_value", "numeric"),
    ]
    # Without catalog.json: the documented columns, typed only where the manifest says.
    bare = _by_id(_project(catalog={}))["model.jaffle.customers"]
    assert [(c.name, c.data_type) for c in bare.columns] == [
        ("customer_id", None), ("full_name", None), ("lifetime_value", None)
    ]  # fmt: skip


def test_table_lineage_from_depends_on() -> None:
    found = _by_id(_project())
    assert found["model.jaffle.customers"].upstreams == [
        f"{P}/staging/stg_customers", f"{P}/staging/stg_orders", f"{P}/staging/stg_payments"
    ]  # fmt: skip
    assert found["model.jaffle.stg_payments"].upstreams == [f"{P}/raw/payments"]
    assert found["snapshot.jaffle.customers_snapshot"].upstreams == [f"{P}/staging/stg_customers"]
    assert found["seed.jaffle.raw_orders"].upstreams == []


def test_column_lineage_through_ctes_joins_and_expressions() -> None:
    counts = Counts()
    found = {a.unique_id: a for a in assets(_project(), counts)}
    customers = {
        k: {u.rsplit("/", 2)[1] + "." + u.rsplit("/", 1)[1] for u, _ in v}
        for k, v in found["model.jaffle.customers"].column_edges.items()
    }
    assert customers == {
        "customer_id": {"stg_customers.customer_id"},
        "full_name": {"stg_customers.first_name", "stg_customers.last_name"},
        "first_order": {"stg_orders.order_date"},  # min() in a CTE
        "number_of_orders": {"stg_orders.order_id"},  # count() in a CTE, then coalesce()
        "lifetime_value": {"stg_payments.amount"},  # sum() in a CTE that joins two models
    }
    card = found["model.jaffle.orders"].column_edges["card_amount"]
    assert {u.rsplit("/", 1)[1] for u, _ in card} == {"amount", "payment_method"}
    assert card[0][1] == "SUM(CASE WHEN p.payment_method = 'card' THEN p.amount ELSE 0 END)"
    assert found["model.jaffle.stg_orders"].column_edges["customer_id"] == [
        (f"{P}/raw/raw_orders/user_id", '"raw_orders".user_id')
    ]
    assert (counts.nodes, counts.parsed, counts.unparsed) == (9, 6, 0)


def test_unparseable_sql_keeps_table_lineage(caplog: pytest.LogCaptureFixture) -> None:
    manifest = copy.deepcopy(MANIFEST)
    manifest["nodes"]["model.jaffle.orders"]["compiled_code"] = "select from where (("
    counts = Counts()
    caplog.set_level(logging.WARNING, logger="connectors.dbt")
    orders = {a.unique_id: a for a in assets(_project(manifest), counts)}["model.jaffle.orders"]
    assert orders.upstreams and orders.column_edges == {}
    assert counts.unparsed == 1
    assert [r.__dict__["node"] for r in caplog.records if r.getMessage() == "dbt.sql_unparsed"] == [
        "model.jaffle.orders"
    ]


def test_ephemeral_models_are_no_asset_and_lineage_goes_through_them() -> None:
    manifest = copy.deepcopy(MANIFEST)
    manifest["nodes"]["model.jaffle.stg_orders"]["config"]["materialized"] = "ephemeral"
    found = _by_id(_project(manifest))
    assert "model.jaffle.stg_orders" not in found
    assert f"{P}/raw/raw_orders" in found["model.jaffle.orders"].upstreams


# The connector: the artifacts read from the tenant's folder, records and offsets.


@pytest.fixture
def root(tmp_path: Path) -> Path:
    folder = tmp_path / "acme" / "jaffle"
    folder.mkdir(parents=True)
    for name in ("manifest.json", "catalog.json"):
        shutil.copy(ARTIFACTS / name, folder / name)
    return tmp_path


def _connector(root: Path, tenant: str = "acme", **kw: Any) -> DbtConnector:
    config = DbtConfig(manifest="jaffle/manifest.json", catalog="jaffle/catalog.json", instance="wh", **kw)
    return DbtConnector(config, ConnectorContext(tenant, "dbt", access=SourceAccess(artifact_roots=(str(root),))))


def _apply(offsets: dict[str, Any], records: list[SourceRecord]) -> dict[str, Any]:
    out = dict(offsets)
    for r in records:
        key = partition_key(r.partition)
        if r.forgets:
            out.pop(key, None)
        elif isinstance(r.offset, Mapping):
            out[key] = r.offset
    return out


def test_poll_emits_valid_events_and_a_rerun_emits_nothing(root: Path) -> None:
    connector = _connector(root)
    records = list(connector.poll({}))
    types = [r.event.type.split(".")[2] + "." + r.event.type.split(".")[3] for r in records]
    assert types.count("asset.upserted") == 9 + 43  # nine relations, their 43 columns
    edges = [r for r in records if r.event.type == "io.metalake.lineage.edge.added.v1"]
    assert len(edges) == 9 + 29  # depends_on, then one per source column of each column
    for r in records:
        assert decode_record(r.event.key, r.event.value(), r.event.headers()) == r.event
    assert len({r.event.data["version"] for r in records}) == 1
    offsets = _apply({}, records)
    assert len(offsets) == 9
    assert list(connector.poll(offsets)) == []


def test_a_changed_model_is_reemitted_with_removals(root: Path) -> None:
    connector = _connector(root)
    offsets = _apply({}, list(connector.poll({})))
    manifest_path = root / "acme" / "jaffle" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    # orders no longer reads payments: its two payment columns lose their edges, the table edge goes too.
    node = manifest["nodes"]["model.jaffle.orders"]
    node["depends_on"]["nodes"] = ["model.jaffle.stg_orders"]
    node["compiled_code"] = (
        "select o.order_id, o.customer_id, o.order_date, o.status, 0 as card_amount, 0 as amount "
        'from "dbt_jaffle"."staging"."stg_orders" o'
    )
    manifest_path.write_text(json.dumps(manifest))
    records = list(connector.poll(offsets))
    assert {partition_key(r.partition) for r in records} == {partition_key({"node": "model.jaffle.orders"})}
    removed = {(r.event.data["urn"], r.event.data["upstream"]) for r in records if r.event.type.endswith("removed.v1")}
    orders = f"{P}/marts/orders"
    assert removed == {
        (orders, f"{P}/staging/stg_payments"),
        (f"{orders}/card_amount", f"{P}/staging/stg_payments/amount"),
        (f"{orders}/card_amount", f"{P}/staging/stg_payments/payment_method"),
        (f"{orders}/amount", f"{P}/staging/stg_payments/amount"),
    }
    assert list(connector.poll(_apply(offsets, records))) == []


def test_a_model_that_left_the_project_loses_its_edges_not_its_asset(root: Path) -> None:
    connector = _connector(root)
    offsets = _apply({}, list(connector.poll({})))
    manifest_path = root / "acme" / "jaffle" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    del manifest["nodes"]["model.jaffle.orders"]
    manifest_path.write_text(json.dumps(manifest))
    records = list(connector.poll(offsets))
    assert {r.event.type for r in records} == {"io.metalake.lineage.edge.removed.v1"}
    assert len(records) == 2 + 7  # two table edges, seven column edges
    assert records[-1].forgets


def test_paths_stay_inside_the_tenants_folder(root: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="relative"):
        DbtConfig(manifest="../other/manifest.json", instance="wh")
    with pytest.raises(ValueError, match="relative"):
        DbtConfig(manifest="/etc/passwd", instance="wh")
    # Another tenant's folder is not found from this tenant's, and a link out of the folder is refused.
    with pytest.raises(ArtifactError, match="not-found"):
        list(_connector(root, tenant="other").poll({}))
    (root / "acme" / "escape").symlink_to(tmp_path.parent)
    config = DbtConfig(manifest="escape/manifest.json", instance="wh")
    escaped = DbtConnector(config, ConnectorContext("acme", "dbt", access=SourceAccess(artifact_roots=(str(root),))))
    with pytest.raises(ArtifactError, match="not-found"):
        list(escaped.poll({}))
    # A worker without artifact roots reads no local file.
    with pytest.raises(ArtifactError, match="path-refused"):
        list(DbtConnector(config, ConnectorContext("acme", "dbt")).poll({}))


def test_an_unknown_dialect_is_refused_at_configuration() -> None:
    with pytest.raises(ValueError, match="dialect"):
        DbtConfig(manifest="m.json", instance="wh", dialect="nosuchsql")
    assert DbtConfig(manifest="m.json", instance="wh", dialect="snowflake").dialect == "snowflake"


def test_oversized_and_invalid_artifacts_are_refused(root: Path) -> None:
    with pytest.raises(ArtifactError, match="too-large"):
        list(_connector(root, max_artifact_bytes=1024).poll({}))
    (root / "acme" / "jaffle" / "catalog.json").write_text("{not json")
    with pytest.raises(ArtifactError, match="invalid-artifact"):
        list(_connector(root).poll({}))
