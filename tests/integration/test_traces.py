"""One event's trace in the stack's Jaeger: the ingest request, its Kafka produce, the stream job's projection (and
the micro-batch it is linked to), and the outbound delivery of the change it caused.

Real processes exporting over OTLP, as the stack runs them (``stack.env``: ``telemetry.traces_exporter=otlp``): the
stack's connector worker, its streaming job, and an outbound runtime of the test's own (own consumer groups, started
at the end of the topics, a signed webhook to a loopback receiver). The trace id comes back in the ingest answer's
``traceparent`` header; the test then reads ``/api/traces/<id>`` of Jaeger's query API until every span is there.
Jaeger is built from the Go module proxy: a fresh clone's build starts in the background (``make prebuild``), and
``up jaeger`` waits for it.
"""

from __future__ import annotations

import json
import secrets
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from pymongo import MongoClient

from control.connectors.store import ControlStore
from control.subscriptions.store import SubscriptionStore
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.services.jaeger import query_url
from tenants.naming import CONTROL_DATABASE
from tests._support.itest import wait_for
from tests._support.outbound_helpers import WEBHOOK_SECRET, subscribe
from tests._support.outbound_runtime import MAIN_TOPICS, RETRY, RuntimeProcess, start_groups_at_end
from tests._support.sealing import stack_sealer
from tests._support.webhook_server import WebhookServer

pytestmark = pytest.mark.integration

Span = dict[str, Any]


@pytest.fixture(scope="module")
def traced(stack: StackManager) -> StackManager:
    """Jaeger (waiting for its build) and the connector worker, beside the stack the session started."""
    assert stack.context.settings.stack.tracing, "METALAKE_STACK__TRACING is off: the processes export no spans"
    stack.up(["jaeger", "connect"])
    return stack


@pytest.fixture
def outbound(settings: Settings, tmp_path: Path) -> Iterator[RuntimeProcess]:
    run = secrets.token_hex(4)
    groups = {"group_id": f"it-traces-{run}", "retry_group_id": f"it-traces-retry-{run}"}
    start_groups_at_end(settings, {groups["group_id"]: MAIN_TOPICS, groups["retry_group_id"]: RETRY})
    process = RuntimeProcess(
        settings, tmp_path / "outbound.log", ssrf_allow=["127.0.0.0/8"], poll_timeout_s=0.2, **groups
    ).start()
    try:
        yield process
    finally:
        process.stop()


def _trace(settings: Settings, trace_id: str) -> list[Span]:
    """The spans Jaeger holds of the trace, each with its process's ``service.component`` as ``component``."""
    try:
        with urllib.request.urlopen(f"{query_url(settings)}/api/traces/{trace_id}", timeout=5) as resp:  # noqa: S310
            body = json.load(resp)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return []
        raise
    spans: list[Span] = []
    for found in body.get("data") or []:
        components = {
            pid: next((t["value"] for t in p.get("tags", []) if t["key"] == "service.component"), None)
            for pid, p in found["processes"].items()
        }
        spans += [{**s, "component": components.get(s["processID"])} for s in found["spans"]]
    return spans


def _one(spans: list[Span], operation: str) -> Span:
    named = [s for s in spans if s["operationName"] == operation]
    assert len(named) == 1, f"{operation}: {len(named)} spans in {sorted(s['operationName'] for s in spans)}"
    return named[0]


def _refs(span: Span, kind: str) -> list[tuple[str, str]]:
    return [(r["traceID"], r["spanID"]) for r in span.get("references", []) if r["refType"] == kind]


def _ancestors(span: Span, spans: list[Span]) -> list[str]:
    """The span's own id and its parents' within the trace, up to its root."""
    by_id = {s["spanID"]: s for s in spans}
    chain = [span["spanID"]]
    while (parents := _refs(by_id[chain[-1]], "CHILD_OF")) and parents[0][1] in by_id:
        chain.append(parents[0][1])
    return chain


def _event(tenant: str) -> dict[str, Any]:
    return {
        "specversion": "1.0",
        "id": f"traced-{secrets.token_hex(4)}",
        "source": "/tests/traces",
        "type": "io.metalake.asset.upserted.v1",
        "tenantid": tenant,
        "data": {"urn": asset_urn("pg", "it", "db", "public", "traced"), "version": 1, "kind": "table", "name": "t"},
    }


def test_one_ingested_event_has_one_trace_from_the_request_to_its_outbound_delivery(
    traced: StackManager,
    settings: Settings,
    tenant: str,
    mongo: MongoClient[dict[str, Any]],
    outbound: RuntimeProcess,
) -> None:
    hook = WebhookServer(WEBHOOK_SECRET)
    hook.start()
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        subscribe(
            store, tenant, "hook", "webhook", {"url": f"{hook.url}/in"}, {"key_id": "k1", "secret": WEBHOOK_SECRET}
        )
        _, key = ControlStore(mongo[CONTROL_DATABASE], stack_sealer()).write_keys.create(tenant)
        connect = settings.connect
        response = httpx.post(
            f"http://{connect.host}:{connect.port}/v1/events",
            json=[_event(tenant)],
            headers={"Authorization": f"Bearer {key.get_secret_value()}"},
            timeout=30,
        )
        assert response.status_code == 200, response.text
        trace_id = response.headers["traceparent"].split("-")[1]
        wait_for("the webhook delivery of the event's change", lambda: hook.verified, timeout_s=60)

        wanted = {"connect.ingest", "kafka.produce", "enrichment.project", "outbound.deliver"}

        def complete() -> list[Span] | None:
            spans = _trace(settings, trace_id)
            return spans if wanted <= {s["operationName"] for s in spans} else None

        spans = wait_for(f"the spans {sorted(wanted)} of trace {trace_id} in Jaeger", complete, timeout_s=30)
    finally:
        hook.stop()

    intake, produce = _one(spans, "connect.ingest"), _one(spans, "kafka.produce")
    project, deliver = _one(spans, "enrichment.project"), _one(spans, "outbound.deliver")
    # The request's own trace (the caller sent no traceparent): one root, the request's server span (FastAPI's own
    # telemetry makes one) or the intake span itself.
    roots = [s for s in spans if not _refs(s, "CHILD_OF")]
    assert len(roots) == 1
    assert roots[0]["spanID"] in _ancestors(intake, spans)
    assert _refs(produce, "CHILD_OF") == [(trace_id, intake["spanID"])]
    assert _refs(project, "CHILD_OF") == [(trace_id, produce["spanID"])]
    assert _refs(deliver, "CHILD_OF") == [(trace_id, project["spanID"])]
    assert [intake["component"], produce["component"], project["component"], deliver["component"]] == [
        "connect",
        "connect",
        "stream",
        "outbound",
    ]
    tags = {t["key"]: t["value"] for t in deliver["tags"]}
    assert (tags["metalake.destination"], tags["metalake.outcome"]) == ("webhook", "delivered")
    # The delivery's log line names the span it was written in.
    lines = [json.loads(line) for line in outbound.log_path.read_text().splitlines() if line.startswith("{")]
    delivered = [line for line in lines if line["event"] == "outbound.delivered"]
    assert [(line["trace_id"], line["span_id"]) for line in delivered] == [(trace_id, deliver["spanID"])]

    # The micro-batch: a trace of its own, linked both ways with the event's projection span.
    [(batch_trace, batch_span)] = _refs(project, "FOLLOWS_FROM")
    assert batch_trace != trace_id
    batch = next(s for s in _trace(settings, batch_trace) if s["spanID"] == batch_span)
    assert batch["operationName"] == "enrichment.projection_batch"
    assert (trace_id, produce["spanID"]) in _refs(batch, "FOLLOWS_FROM")
