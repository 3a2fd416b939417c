"""OpenLineage events -> metalake events, on payloads shaped as the Spark, Airflow and dbt integrations send them
(checked against the spec's own JSON Schemas first, so what is mapped here is what the spec admits)."""

from __future__ import annotations

import copy
import json
from functools import cache
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from referencing import Registry, Resource

from connectors.openlineage.mapping import (
    EDGE_ADDED,
    UPSERTED,
    InvalidLineage,
    Mapped,
    TooManyEvents,
    body_digest,
    map_event,
)
from connectors.openlineage.naming import InvalidName, dataset_urn, split_namespace, table_path
from control.auth.pii import weakening
from metalake.urn import asset_urn

HERE = Path(__file__).parent
PAYLOADS = HERE / "payloads"
SPEC = HERE / "spec"


@cache
def _schemas() -> tuple[Registry, dict[str, Any], dict[str, dict[str, Any]]]:
    documents = [json.loads(p.read_text()) for p in sorted(SPEC.glob("*.json"))]
    registry: Registry = Registry().with_resources((d["$id"], Resource.from_contents(d)) for d in documents)
    main = next(d for d in documents if d["$id"].endswith("/OpenLineage.json"))
    # Facet schemas by the key they describe; ``documentation`` exists for jobs and datasets (same shape here).
    facets = {key: d for d in documents if "properties" in d for key in d["properties"]}
    return registry, main, facets


def _spec_errors(event: dict[str, Any]) -> list[str]:
    registry, main, facet_schemas = _schemas()
    errors = [e.message for e in Draft202012Validator(main, registry=registry).iter_errors(event)]
    holders: list[dict[str, Any]] = [event.get("run", {}), event.get("job", {})]
    for key in ("inputs", "outputs"):
        holders.extend(event.get(key, []))
    if "dataset" in event:
        holders.append(event["dataset"])
    for holder in holders:
        for group in ("facets", "inputFacets", "outputFacets"):
            for name, facet in holder.get(group, {}).items():
                schema = facet_schemas.get(name)
                if schema is not None:
                    validator = Draft202012Validator(schema, registry=registry)
                    errors.extend(f"{name}: {e.message}" for e in validator.iter_errors({name: facet}))
    return errors


def _load(name: str) -> dict[str, Any]:
    event: dict[str, Any] = json.loads((PAYLOADS / f"{name}.json").read_text())
    return event


def _map(event: dict[str, Any], max_events: int = 10_000) -> Mapped:
    return map_event(event, "acme", body_digest(json.dumps(event).encode()), max_events=max_events)


def _of(mapped: Mapped, event_type: str) -> dict[str, dict[str, Any]]:
    out = {}
    for e in mapped.events:
        if e.type == event_type:
            key = f"{e.data['upstream']} -> {e.data['urn']}" if event_type == EDGE_ADDED else e.data["urn"]
            out[key] = e.data
    return out


@pytest.mark.parametrize("name", ["spark_complete", "airflow_complete", "dbt_complete", "job_event", "dataset_event"])
def test_the_payloads_are_valid_openlineage(name: str) -> None:
    assert _spec_errors(_load(name)) == []


def test_the_spec_check_catches_a_broken_payload() -> None:
    # The check above is not vacuous: a RunEvent without a run id, or a facet of the wrong shape, fails it.
    event = _load("spark_complete")
    del event["run"]["runId"]
    event["outputs"][0]["facets"]["schema"]["fields"] = "order_day"
    errors = _spec_errors(event)
    assert any("runId" in e for e in errors) and any(e.startswith("schema:") for e in errors)


# -- naming -----------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("namespace", "name", "urn"),
    [
        (
            "postgres://db.example.com:5432",
            "shop.public.orders",
            asset_urn("postgres", "db.example.com:5432", "shop", "public", "orders"),
        ),
        (
            "postgresql://DB.example.com:5432",
            "shop.public.orders",
            asset_urn("postgres", "db.example.com:5432", "shop", "public", "orders"),
        ),
        (
            "snowflake://acme-xy12345",
            "SALES.PUBLIC.ORDERS",
            asset_urn("snowflake", "acme-xy12345", "SALES", "PUBLIC", "ORDERS"),
        ),
        ("bigquery", "project.dataset.table.v2", asset_urn("bigquery", "default", "project", "dataset", "table.v2")),
        ("mysql://db:3306", "shop.orders", asset_urn("mysql", "db:3306", "default", "shop", "orders")),
        ("hive://metastore:9083", "raw.orders", asset_urn("hive", "metastore:9083", "default", "raw", "orders")),
        (
            "s3a://lake",
            "orders/2024/part.parquet",
            asset_urn("s3", "lake", "default", "default", "orders/2024/part.parquet"),
        ),
        ("kafka://broker:9092", "orders.v1", asset_urn("kafka", "broker:9092", "default", "default", "orders.v1")),
        ("file", "/data/orders.csv", asset_urn("file", "default", "default", "default", "/data/orders.csv")),
        ("trino://trino:8080", "lake.acme.orders", asset_urn("trino", "trino:8080", "lake", "acme", "orders")),
    ],
)
def test_dataset_names_become_table_urns(namespace: str, name: str, urn: str) -> None:
    assert str(dataset_urn(namespace, name)) == urn


def test_credentials_in_a_namespace_never_reach_the_urn_but_an_azure_container_does() -> None:
    assert split_namespace("postgres://etl:hunter2@db:5432") == ("postgres", "db:5432")
    assert split_namespace("abfss://raw@acct.dfs.core.windows.net") == ("abfss", "raw@acct.dfs.core.windows.net")
    assert split_namespace("9weird+scheme://host") == ("ol-9weird-scheme", "host")
    assert table_path("postgres", "a..b") == ("default", "default", "a..b")


@pytest.mark.parametrize(("namespace", "name"), [("", "a.b.c"), ("postgres://db", " ")])
def test_an_empty_namespace_or_name_names_nothing(namespace: str, name: str) -> None:
    with pytest.raises(InvalidName):
        dataset_urn(namespace, name)


# -- Spark ------------------------------------------------------------------------------------------------------------

RAW = asset_urn("hive", "metastore.internal:9083", "default", "raw", "orders")
CURATED = asset_urn("hive", "metastore.internal:9083", "default", "curated", "orders_daily")


def test_spark_symlinks_name_the_tables_and_the_physical_path_is_a_property() -> None:
    mapped = _map(_load("spark_complete"))
    assets = _of(mapped, UPSERTED)
    assert assets[RAW]["kind"] == "table" and "properties" not in assets[RAW]
    props = assets[CURATED]["properties"]
    assert props["openlineage_location"] == "s3://lake-curated/warehouse/orders_daily"
    assert props["openlineage_namespace"] == "s3://lake-curated"
    assert props["openlineage_job_name"].startswith("orders_daily.execute_insert")
    assert props["openlineage_run_event_type"] == "COMPLETE"
    assert props["openlineage_run_id"] == "0190dd5e-0c4f-7a8e-9d2b-3f1a6c7e8b90"
    assert props["openlineage_parent_job_name"] == "orders_daily"
    assert props["openlineage_parent_run_id"] == "0190dd5d-f1a2-7b3c-8d4e-5f6a7b8c9d0e"
    assert props["openlineage_engine"] == "spark 3.5.1"
    assert props["openlineage_job_type"] == "SPARK/SQL_JOB"
    assert props["openlineage_storage_layer"] == "delta"
    assert props["openlineage_producer"].endswith("/integration/spark")
    # Nested struct fields are columns named by their path.
    assert assets[f"{RAW}/customer.email"]["data_type"] == "string"
    assert assets[f"{CURATED}/total"] == {
        "urn": f"{CURATED}/total",
        "version": 1717406142871,
        "kind": "column",
        "name": "total",
        "data_type": "decimal(22,2)",
    }


def test_spark_lineage_table_edge_and_direct_column_edges_only() -> None:
    mapped = _map(_load("spark_complete"))
    edges = _of(mapped, EDGE_ADDED)
    assert set(edges) == {
        f"{RAW} -> {CURATED}",
        f"{RAW}/created_at -> {CURATED}/order_day",
        f"{RAW}/amount -> {CURATED}/total",
        f"{RAW}/customer.email -> {CURATED}/customer_email",
    }  # is_large (INDIRECT/CONDITIONAL) and the dataset-wide FILTER on status are no edges
    assert edges[f"{RAW}/amount -> {CURATED}/total"]["transformation"] == "DIRECT/AGGREGATION"
    assert edges[f"{RAW} -> {CURATED}"]["transformation"].startswith("openlineage job spark-prod/orders_daily.")
    assert (mapped.assets, mapped.columns, mapped.edges, mapped.column_edges) == (2, 11, 1, 3)
    # Table and column edges are plain downstream edges: none asks for the PII grant the ingest API checks.
    assert all(weakening(e.type, e.data, ["PII*"]) is None for e in mapped.events)


def test_columns_travel_on_bulk_and_tables_and_edges_on_priority() -> None:
    from metalake.events import spec_for

    for event in _map(_load("spark_complete")).events:
        expected = "bulk" if event.data.get("kind") == "column" else "priority"
        assert spec_for(event.type).topic_class(event.data) == expected


# -- Airflow ----------------------------------------------------------------------------------------------------------


def test_airflow_sql_operator_with_the_older_column_lineage_shape() -> None:
    mapped = _map(_load("airflow_complete"))
    raw = asset_urn("postgres", "db.example.com:5432", "shop", "public", "customers_raw")
    out = asset_urn("postgres", "db.example.com:5432", "shop", "analytics", "customers")
    edges = _of(mapped, EDGE_ADDED)
    # No transformations listed (the facet before 1-1-0): the input fields are direct.
    assert set(edges) == {f"{raw} -> {out}", *(f"{raw}/{c} -> {out}/{c}" for c in ("id", "email", "country"))}
    assert edges[f"{raw}/email -> {out}/email"]["transformation"] == "lower(email)"
    assert "transformation" not in edges[f"{raw}/id -> {out}/id"]
    props = _of(mapped, UPSERTED)[out]["properties"]
    assert props["openlineage_job_namespace"] == "airflow-prod"
    assert props["openlineage_parent_job_name"] == "customers_dag"
    assert props["openlineage_engine"] == "Airflow 2.10.2"
    assert props["openlineage_event_time"] == "2024-06-03T02:00:07.412345+00:00"
    assert all(e.time.isoformat() == "2024-06-03T02:00:07.412345+00:00" for e in mapped.events)


# -- dbt --------------------------------------------------------------------------------------------------------------

ORDERS = asset_urn("postgres", "warehouse.internal:5432", "jaffle", "dev", "orders")
STG_ORDERS = asset_urn("postgres", "warehouse.internal:5432", "jaffle", "dev", "stg_orders")
STG_PAYMENTS = asset_urn("postgres", "warehouse.internal:5432", "jaffle", "dev", "stg_payments")


def test_dbt_model_descriptions_and_both_upstreams() -> None:
    mapped = _map(_load("dbt_complete"))
    assets = _of(mapped, UPSERTED)
    assert assets[ORDERS]["description"] == "One row per order, with what was paid"
    assert assets[f"{ORDERS}/amount"]["description"] == "Total paid for the order"
    assert "data_type" not in assets[f"{ORDERS}/amount"]  # dbt knows no type before the catalog
    assert assets[STG_ORDERS]["description"] == "Orders, cleaned"
    assert STG_PAYMENTS in assets
    assert set(_of(mapped, EDGE_ADDED)) == {f"{STG_ORDERS} -> {ORDERS}", f"{STG_PAYMENTS} -> {ORDERS}"}
    assert assets[ORDERS]["properties"]["openlineage_job_type"] == "DBT/MODEL"


@pytest.mark.parametrize(
    ("event_type", "edges"), [("START", 0), ("RUNNING", 2), ("COMPLETE", 2), ("FAIL", 0), ("ABORT", 0), ("OTHER", 0)]
)
def test_edges_only_when_data_flowed(event_type: str, edges: int) -> None:
    event = _load("dbt_complete")
    event["eventType"] = event_type
    mapped = _map(event)
    assert mapped.edges == edges and mapped.event_type == event_type
    # The datasets and the run's state are recorded whatever the state.
    assert _of(mapped, UPSERTED)[ORDERS]["properties"]["openlineage_run_event_type"] == event_type


def test_no_event_type_is_other() -> None:
    event = _load("dbt_complete")
    del event["eventType"]
    assert _map(event).event_type == "OTHER" and _map(event).edges == 0


def test_a_resent_event_has_the_same_ids_and_a_later_one_a_higher_version() -> None:
    event = _load("dbt_complete")
    first, again = _map(event), _map(copy.deepcopy(event))
    assert [e.id for e in first.events] == [e.id for e in again.events]
    later = copy.deepcopy(event)
    later["eventTime"] = "2024-06-03T06:30:12.120000+00:00"
    moved = _map(later)
    assert moved.events[0].data["version"] == first.events[0].data["version"] + 1000
    assert {e.id for e in moved.events}.isdisjoint(e.id for e in first.events)


# -- JobEvent and DatasetEvent ----------------------------------------------------------------------------------------


def test_a_job_event_declares_static_lineage() -> None:
    mapped = _map(_load("job_event"))
    assert mapped.kind == "job" and mapped.event_type is None
    source = asset_urn("postgres", "db.example.com:5432", "shop", "public", "orders")
    export = asset_urn("s3", "exports", "default", "default", "orders/daily.csv")
    assert set(_of(mapped, EDGE_ADDED)) == {f"{source} -> {export}"}
    props = _of(mapped, UPSERTED)[export]["properties"]
    assert props["openlineage_job_name"] == "exports_dag.export_orders"
    assert "openlineage_run_id" not in props


def test_a_dataset_event_upserts_the_dataset_alone() -> None:
    mapped = _map(_load("dataset_event"))
    urn = asset_urn("postgres", "db.example.com:5432", "shop", "public", "active_customers")
    assets = _of(mapped, UPSERTED)
    assert set(assets) == {urn, f"{urn}/customer_id", f"{urn}/email"}
    assert assets[urn]["kind"] == "view"
    assert assets[urn]["owners"] == ["team:data-eng"]
    assert assets[urn]["description"] == "Customers with an order in the last 90 days"
    assert assets[urn]["properties"]["openlineage_name"] == "shop.public.active_customers"
    assert not _of(mapped, EDGE_ADDED)


# -- refusals ---------------------------------------------------------------------------------------------------------


def _broken(name: str, path: list[str | int], value: Any) -> dict[str, Any]:
    event = _load(name)
    target: Any = event
    for step in path[:-1]:
        target = target[step]
    if value is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return event


_DELETE = object()


@pytest.mark.parametrize(
    ("name", "path", "value", "pointer"),
    [
        ("spark_complete", ["eventTime"], _DELETE, "/eventTime"),
        ("spark_complete", ["eventTime"], "yesterday", "/eventTime"),
        ("spark_complete", ["eventTime"], "2024-06-03T09:15:42", "/eventTime"),
        ("spark_complete", ["producer"], 7, "/producer"),
        ("spark_complete", ["schemaURL"], _DELETE, "/schemaURL"),
        ("spark_complete", ["eventType"], "DONE", "/eventType"),
        ("spark_complete", ["run", "runId"], "run-1", "/run/runId"),
        ("spark_complete", ["job", "name"], "", "/job/name"),
        ("spark_complete", ["inputs"], {"a": 1}, "/inputs"),
        ("spark_complete", ["outputs", 0, "namespace"], _DELETE, "/outputs/0/namespace"),
        (
            "spark_complete",
            ["outputs", 0, "facets", "schema", "fields", 1, "name"],
            None,
            "/outputs/0/facets/schema/fields/1/name",
        ),
        (
            "spark_complete",
            ["inputs", 0, "facets", "schema", "fields", 4, "fields", 0],
            "id",
            "/inputs/0/facets/schema/fields/4/fields/0",
        ),
        (
            "spark_complete",
            ["outputs", 0, "facets", "columnLineage", "fields", "total", "inputFields", 0, "field"],
            3,
            "/outputs/0/facets/columnLineage/fields/total/inputFields/0/field",
        ),
        (
            "spark_complete",
            ["outputs", 0, "facets", "symlinks", "identifiers", 0, "name"],
            _DELETE,
            "/outputs/0/facets/symlinks/identifiers/0/name",
        ),
        ("spark_complete", ["run", "facets", "parent", "run"], "x", "/run/facets/parent/run"),
        (
            "dataset_event",
            ["dataset", "facets", "ownership", "owners", 0],
            "team",
            "/dataset/facets/ownership/owners/0",
        ),
        ("dataset_event", ["dataset", "name"], " ", "/dataset/name"),
    ],
)
def test_bad_input_names_the_json_pointer(name: str, path: list[str | int], value: Any, pointer: str) -> None:
    with pytest.raises(InvalidLineage) as err:
        _map(_broken(name, path, value))
    assert err.value.pointer == pointer


def test_pointers_escape_slashes_in_column_names() -> None:
    event = _load("spark_complete")
    fields = event["outputs"][0]["facets"]["columnLineage"]["fields"]
    fields["a/b~c"] = {"inputFields": "nope"}
    with pytest.raises(InvalidLineage) as err:
        _map(event)
    assert err.value.pointer == "/outputs/0/facets/columnLineage/fields/a~1b~0c/inputFields"


def test_not_an_event_at_all() -> None:
    for value, pointer in (([1], "/"), ({"eventTime": "2024-01-01T00:00:00Z"}, "/")):
        with pytest.raises(InvalidLineage) as err:
            _map(value)  # type: ignore[arg-type]
        assert err.value.pointer == pointer


def test_a_name_a_urn_cannot_hold_is_refused_at_its_pointer() -> None:
    event = _load("dbt_complete")
    event["outputs"][0]["facets"]["schema"]["fields"][0]["name"] = "x" * 2000
    with pytest.raises(InvalidLineage) as err:
        _map(event)
    assert err.value.pointer == "/outputs/0/facets/schema/fields/0/name"


def test_long_free_text_is_cut_not_refused() -> None:
    event = _load("spark_complete")
    event["outputs"][0]["facets"]["schema"]["fields"][0]["type"] = "struct<" + "a:int," * 400 + ">"
    assets = _of(_map(event), UPSERTED)
    assert len(assets[f"{CURATED}/order_day"]["data_type"]) == 1024


def test_one_event_may_become_at_most_max_events() -> None:
    event = _load("spark_complete")
    assert len(_map(event, max_events=17).events) == 17  # 2 tables, 11 columns, 1 table edge, 3 column edges
    with pytest.raises(TooManyEvents):
        _map(event, max_events=16)


def test_a_masking_transformation_is_said_in_the_edge() -> None:
    # A hash of an email is still a value derived from it: the edge stays (PII spreads) and says it was masked.
    event = _load("spark_complete")
    field = event["outputs"][0]["facets"]["columnLineage"]["fields"]["customer_email"]["inputFields"][0]
    field["transformations"] = [{"type": "DIRECT", "subtype": "TRANSFORMATION", "masking": True}]
    edge = _of(_map(event), EDGE_ADDED)[f"{RAW}/customer.email -> {CURATED}/customer_email"]
    assert edge["transformation"] == "DIRECT/TRANSFORMATION (masking)" and "blocked_tags" not in edge
