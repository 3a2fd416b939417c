"""OpenLineage in, end to end: the official ``openlineage-python`` client's HttpTransport (api_key auth, gzip)
posts run events to the worker served over HTTP -> Kafka -> the shared stack's streaming job -> the tenant's assets
and lineage in MongoDB."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi.testclient import TestClient
from openlineage.client import OpenLineageClient
from openlineage.client.event_v2 import InputDataset, Job, OutputDataset, Run, RunEvent, RunState
from openlineage.client.facet_v2 import column_lineage_dataset, job_type_job, parent_run, schema_dataset
from openlineage.client.transport.http import ApiKeyTokenProvider, HttpCompression, HttpConfig, HttpTransport
from openlineage.client.uuid import generate_new_uuid
from pymongo import MongoClient

from catalog import projection
from connectors.runtime.worker import create_app
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.naming import names_for
from tests._support.itest import wait_for
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import tenant_admin, worker_settings

pytestmark = pytest.mark.integration

NAMESPACE = "postgres://warehouse.test:5432"
PRODUCER = "https://github.com/OpenLineage/OpenLineage/tree/1.54.0/client/python"


def _free_port() -> int:
    # The range this suite's private servers use (never a stack port).
    for port in range(21100, 21200):
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port in 21100-21199")


@pytest.fixture(scope="module")
def worker_url(settings: Settings, stack: StackManager) -> Iterator[str]:
    """The worker app served by uvicorn on loopback, as ``metalake connect run`` serves it."""
    port = _free_port()
    config = uvicorn.Config(create_app(worker_settings(settings), plugins=PLUGINS), host="127.0.0.1", port=port)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="ol-worker", daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the worker did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


def _client(url: str, key: str) -> OpenLineageClient:
    config = HttpConfig(
        url=url, auth=ApiKeyTokenProvider({"api_key": key}), compression=HttpCompression.GZIP, timeout=15.0
    )
    return OpenLineageClient(transport=HttpTransport(config))


def _schema(*columns: str) -> schema_dataset.SchemaDatasetFacet:
    return schema_dataset.SchemaDatasetFacet(
        fields=[schema_dataset.SchemaDatasetFacetFields(name=c, type="varchar") for c in columns]
    )


def _run_event(state: RunState, run_id: str, when: datetime) -> RunEvent:
    lineage = column_lineage_dataset.ColumnLineageDatasetFacet(
        fields={
            "email": column_lineage_dataset.Fields(
                inputFields=[
                    column_lineage_dataset.InputField(
                        namespace=NAMESPACE,
                        name="shop.public.customers",
                        field="email",
                        transformations=[column_lineage_dataset.Transformation(type="DIRECT", subtype="IDENTITY")],
                    )
                ]
            )
        }
    )
    return RunEvent(
        eventType=state,
        eventTime=when.isoformat(),
        run=Run(
            runId=run_id,
            facets={
                "parent": parent_run.ParentRunFacet(
                    run=parent_run.Run(runId=str(generate_new_uuid())),
                    job=parent_run.Job(namespace="airflow-it", name="customers_dag"),
                )
            },
        ),
        job=Job(
            namespace="airflow-it",
            name="customers_dag.copy_customers",
            facets={
                "jobType": job_type_job.JobTypeJobFacet(processingType="BATCH", integration="AIRFLOW", jobType="TASK")
            },
        ),
        inputs=[InputDataset(NAMESPACE, "shop.public.customers", facets={"schema": _schema("id", "email")})],
        outputs=[
            OutputDataset(
                NAMESPACE,
                "shop.analytics.customers",
                facets={"schema": _schema("id", "email"), "columnLineage": lineage},
            )
        ],
        producer=PRODUCER,
    )


def test_the_official_client_sends_run_events_that_reach_mongodb(
    worker_url: str, api: TestClient, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    created = api.post(f"/v1/tenants/{tenant}/write-keys", headers=tenant_admin(api, tenant))
    assert created.status_code == 201, created.text
    key: str = created.json()["key"]
    client = _client(worker_url, key)
    run_id = str(generate_new_uuid())
    started = datetime.now(UTC).replace(microsecond=0)
    # emit raises on a non-2xx answer (the transport's raise_for_status): both were accepted, i.e. durable in Kafka.
    client.emit(_run_event(RunState.START, run_id, started))
    client.emit(_run_event(RunState.COMPLETE, run_id, started + timedelta(seconds=3)))
    client.close()

    source = asset_urn("postgres", "warehouse.test:5432", "shop", "public", "customers")
    target = asset_urn("postgres", "warehouse.test:5432", "shop", "analytics", "customers")
    database = mongo[names_for(tenant, settings.lake_root).mongo_database]
    assets, edges = database[projection.ASSETS_COLLECTION], database[projection.LINEAGE_COLLECTION]

    def completed() -> dict[str, Any] | None:
        doc = assets.find_one({"_id": target})
        props = (doc or {}).get("properties") or {}
        return doc if props.get("openlineage_run_event_type") == "COMPLETE" else None

    doc = wait_for("the output table with the COMPLETE run's facts in MongoDB", completed, timeout_s=300)
    props = doc["properties"]
    assert props["openlineage_run_id"] == run_id
    assert props["openlineage_job_name"] == "customers_dag.copy_customers"
    assert props["openlineage_parent_job_name"] == "customers_dag"
    assert props["openlineage_producer"] == PRODUCER
    assert doc["kind"] == "table" and doc["name"] == "customers"
    column = wait_for("the output's column", lambda: assets.find_one({"_id": f"{target}/email"}))
    assert (column["kind"], column["data_type"]) == ("column", "varchar")
    assert wait_for("the input table", lambda: assets.find_one({"_id": source}))["kind"] == "table"
    table_edge = wait_for("the table edge", lambda: edges.find_one({"_id": f"{source}|{target}"}))
    assert table_edge["transformation"] == "openlineage job airflow-it/customers_dag.copy_customers"
    column_edge = wait_for("the column edge", lambda: edges.find_one({"_id": f"{source}/email|{target}/email"}))
    assert column_edge["transformation"] == "DIRECT/IDENTITY" and column_edge["deleted"] is False


def test_bad_events_are_refused_naming_the_field_and_publish_nothing(
    worker_url: str, api: TestClient, settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]]
) -> None:
    created = api.post(f"/v1/tenants/{tenant}/write-keys", headers=tenant_admin(api, tenant))
    key = created.json()["key"]
    event: dict[str, Any] = {
        "eventType": "COMPLETE",
        "eventTime": datetime.now(UTC).isoformat(),
        "producer": PRODUCER,
        "schemaURL": "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent",
        "run": {"runId": str(generate_new_uuid())},
        "job": {"namespace": "it", "name": "bad"},
        "outputs": [{"namespace": NAMESPACE, "name": "shop.analytics.never"}, {"namespace": NAMESPACE}],
    }
    with httpx.Client(base_url=worker_url, timeout=15.0) as http:
        refused = http.post("/api/v1/lineage", json=event, headers={"Authorization": f"Bearer {key}"})
        assert refused.status_code == 400, refused.text
        assert refused.json()["field"] == "/outputs/1/name"
        assert http.post("/api/v1/lineage", json=event).status_code == 401
    # The first output was valid; it must not have been published on its own. A later accepted event of the same
    # tenant is projected, so once it is there, anything published before it would be too.
    client = _client(worker_url, key)
    client.emit(_run_event(RunState.COMPLETE, str(generate_new_uuid()), datetime.now(UTC)))
    database = mongo[names_for(tenant, settings.lake_root).mongo_database]
    target = asset_urn("postgres", "warehouse.test:5432", "shop", "analytics", "customers")
    wait_for("a later event", lambda: database[projection.ASSETS_COLLECTION].find_one({"_id": target}), timeout_s=300)
    never = asset_urn("postgres", "warehouse.test:5432", "shop", "analytics", "never")
    assert database[projection.ASSETS_COLLECTION].find_one({"_id": never}) is None
