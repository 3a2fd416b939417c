"""The dbt connector reading its artifacts from the local stack's SeaweedFS (started here if the session has none):
the committed artifacts of tests/fixtures/dbt_project uploaded to a bucket, the connector created through the admin
API with an ``s3://`` configuration (its key pair sealed as secret fields), crawled through the runtime (Kafka), its
assets and lineage seen in MongoDB (the shared streaming job), and a rerun on the unchanged objects downloading and
publishing nothing (SeaweedFS answers the ETag-conditional GETs with 304)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from pymongo import MongoClient

from connectors.dbt import DbtConnector
from connectors.runtime.context import Runtime
from connectors.runtime.source_runner import crawl
from connectors.runtime.worker import build_runtime
from metalake.s3 import S3Client, S3Error
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.services.seaweedfs import stack_client
from tenants.naming import CONTROL_DATABASE, names_for
from tests._support.itest import wait_for
from tests._support.runtime_plugins import PLUGINS
from tests._support.worker_helpers import admin_api, connectors_route, create_connector, tenant_admin, worker_settings

pytestmark = [pytest.mark.integration, pytest.mark.s3]

ARTIFACTS = Path(__file__).resolve().parents[2] / "fixtures" / "dbt_project" / "artifacts"
WITH_DBT = {**PLUGINS, "dbt": DbtConnector}
# The bucket of tests/integration/test_s3_lake.py: SeaweedFS grows volumes for a bucket at its first write (seconds on
# two cores), so a session that runs both pays that once.
BUCKET = "metalake-it"
P = "urn:metalake:postgres:wh/dbt_jaffle"


def _put(client: S3Client, bucket: str, key: str, body: bytes) -> None:
    """A signed PutObject (metalake itself never writes objects: only this test does)."""
    parts = urllib.parse.urlsplit(client.endpoint)
    path = urllib.parse.quote(f"/{bucket}/{key}", safe="/-_.~")
    now = datetime.now(UTC)
    amz_date, day = now.strftime("%Y%m%dT%H%M%SZ"), now.strftime("%Y%m%d")
    payload = hashlib.sha256(body).hexdigest()
    headers = {"host": parts.netloc, "x-amz-content-sha256": payload, "x-amz-date": amz_date}
    names = ";".join(sorted(headers))
    canonical = "\n".join(["PUT", path, "", "".join(f"{k}:{headers[k]}\n" for k in sorted(headers)), names, payload])
    scope = f"{day}/{client.region}/s3/aws4_request"
    to_sign = "\n".join(["AWS4-HMAC-SHA256", amz_date, scope, hashlib.sha256(canonical.encode()).hexdigest()])
    signing = f"AWS4{client.secret_access_key.get_secret_value()}".encode()
    for part in (day, client.region, "s3", "aws4_request"):
        signing = hmac.new(signing, part.encode(), hashlib.sha256).digest()
    signature = hmac.new(signing, to_sign.encode(), hashlib.sha256).hexdigest()
    headers["authorization"] = (
        f"AWS4-HMAC-SHA256 Credential={client.access_key_id.get_secret_value()}/{scope}, "
        f"SignedHeaders={names}, Signature={signature}"
    )
    request = urllib.request.Request(f"{client.endpoint}{path}", data=body, method="PUT", headers=headers)  # noqa: S310
    with urllib.request.urlopen(request, timeout=60) as resp:  # noqa: S310 - the stack's endpoint
        assert resp.status == 200


@pytest.fixture(scope="module")
def seaweedfs(stack: StackManager) -> S3Client:
    # The stack's own SeaweedFS and identity (stack.env's keys), whatever lake.s3 points at in this session.
    client = stack_client(stack.context, timeout_s=30.0)
    try:
        client.list_buckets()
    except S3Error:
        stack.up(["seaweedfs"])
        client.list_buckets()
    client.create_bucket(BUCKET)
    return client


@pytest.fixture
def dbt_runtime(settings: Settings, stack: StackManager) -> Iterator[Runtime]:
    # The stack's SeaweedFS listens on loopback: the SSRF guard lets it through only because this worker allows it.
    local = worker_settings(settings, ssrf_allow=["127.0.0.0/8", "::1/128"])
    built = build_runtime(local, plugins=WITH_DBT)
    yield built
    built.publisher.close()
    built.offsets.close()


@pytest.fixture
def dbt_api(settings: Settings, stack: StackManager) -> Iterator[TestClient]:
    with admin_api(settings, plugins=WITH_DBT) as client:
        yield client


def test_artifacts_from_s3_reach_mongodb_and_a_rerun_publishes_nothing(
    seaweedfs: S3Client,
    dbt_api: TestClient,
    dbt_runtime: Runtime,
    settings: Settings,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    caplog: pytest.LogCaptureFixture,
) -> None:
    prefix = f"dbt-{tenant}/jaffle-{secrets.token_hex(3)}/target"
    for name in ("manifest.json", "catalog.json"):
        _put(seaweedfs, BUCKET, f"{prefix}/{name}", (ARTIFACTS / name).read_bytes())
    secret_key = seaweedfs.secret_access_key.get_secret_value()
    config = {
        "manifest": f"s3://{BUCKET}/{prefix}/manifest.json",
        "catalog": f"s3://{BUCKET}/{prefix}/catalog.json",
        "instance": "wh",
        "s3_endpoint": seaweedfs.endpoint,
        "s3_region": seaweedfs.region,
        "s3_access_key_id": seaweedfs.access_key_id.get_secret_value(),
        "s3_secret_access_key": secret_key,
    }
    admin = tenant_admin(dbt_api, tenant)
    view = create_connector(dbt_api, admin, tenant, "dbt", type="dbt", config=config)
    assert view["config"]["s3_secret_access_key"] == "**********"
    shown = dbt_api.get(connectors_route(tenant, "dbt"), headers=admin).text
    assert secret_key not in shown
    # Sealed at rest: the control plane holds neither key in clear.
    control = mongo[CONTROL_DATABASE]
    stored = [str(control[c].find_one({"_id": f"{tenant}/dbt"})) for c in ("connectors", "connector_secrets")]
    assert "s3_secret_access_key" in stored[1] and all(secret_key not in d for d in stored)

    report = crawl(dbt_runtime, tenant, "dbt")
    assert not report.failed
    assert report.per_kind == {"table": 6, "view": 3, "column": 43, "lineage_edge_added": 9 + 29}

    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    wait_for("the dbt assets in MongoDB", lambda: db["assets"].count_documents({}) == 52 or None, timeout_s=240)
    customers = db["assets"].find_one({"_id": f"{P}/marts/customers"})
    assert customers is not None and customers["owners"] == ["finance@example.com"]
    edges = db["lineage"]
    wait_for("the dbt lineage in MongoDB", lambda: edges.count_documents({}) == 9 + 29 or None, timeout_s=240)
    pairs = {(d["upstream"], d["urn"]) for d in edges.find({}, {"upstream": 1, "urn": 1})}
    assert (f"{P}/staging/stg_customers/first_name", f"{P}/marts/customers/full_name") in pairs

    # The rerun asks SeaweedFS with the ETags of the first read: two 304s, nothing downloaded, parsed or published.
    caplog.clear()
    caplog.set_level(logging.INFO, logger="connectors.dbt")
    again = crawl(dbt_runtime, tenant, "dbt")
    assert not again.failed and sum(t.records for t in again.tasks) == 0
    messages = [r.message for r in caplog.records if r.name.startswith("connectors.dbt")]
    assert "dbt.artifacts_unchanged" in messages and "dbt.project_read" not in messages
