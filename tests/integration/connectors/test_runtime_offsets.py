"""Source offsets in the compacted topic, and the source runner resuming from them, on the real Kafka."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient

from api.services.audit import tenant_audit_path
from connectors.runtime.context import Runtime
from connectors.runtime.source_runner import CrawlRefused, crawl
from control.audit import AuditQuery, read
from control.connectors.reasons import INTERNAL
from control.connectors.records import ConnectorState
from ops.settings import Settings
from tenants.naming import PRIORITY_TOPIC
from tests._support.kafka_tail import mark, of_tenant, read_since
from tests._support.worker_helpers import connectors_route, create_connector, tenant_admin

pytestmark = pytest.mark.integration


def test_offsets_round_trip_with_tombstone(runtime: Runtime, tenant: str) -> None:
    offsets = runtime.offsets
    assert offsets.load(tenant, "src") == {}
    offsets.store(tenant, "src", {"table=a": {"version": 1}, "table=b": {"version": 1}})
    offsets.store(tenant, "src", {"table=a": {"version": 2}})
    offsets.store(tenant, "other", {"table=a": {"version": 9}})
    assert offsets.load(tenant, "src") == {"table=a": {"version": 2}, "table=b": {"version": 1}}
    offsets.store(tenant, "src", {"table=b": None})
    assert offsets.load(tenant, "src") == {"table=a": {"version": 2}}
    assert offsets.load(tenant, "other") == {"table=a": {"version": 9}}


def test_crawl_stores_offsets_and_a_rerun_resumes(
    runtime: Runtime, api: TestClient, settings: Settings, tenant: str
) -> None:
    admin = tenant_admin(api, tenant)
    route = connectors_route(tenant, "src")
    create_connector(api, admin, tenant, "src", type="listsource", config={"tables": ["a", "b", "c"]})
    marks = mark(settings, PRIORITY_TOPIC)
    first = crawl(runtime, tenant, "src")
    assert (first.records, first.batches, first.deletions) == (3, 2, 0)  # batch size 2
    stored = api.get(f"{route}/offsets", headers=admin).json()["offsets"]
    assert stored == [{"partition": f"table={t}", "offset": {"version": 1}} for t in "abc"]

    spec = {"type": "listsource", "config": {"tables": ["a", "b"]}}  # c was dropped at the source
    assert api.put(route, json=spec, headers=admin).status_code == 200
    second = crawl(runtime, tenant, "src")
    assert (second.records, second.deletions) == (1, 1)
    assert runtime.offsets.load(tenant, "src") == {"table=a": {"version": 1}, "table=b": {"version": 1}}
    records = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=4)
    assert [r.headers["ce_type"].rsplit(b".", 2)[-2] for r in records].count(b"deleted") == 1
    assert len(records) == 4


def test_a_failing_task_is_failed_with_its_trace_and_skipped_until_restarted(
    runtime: Runtime, api: TestClient, tenant: str
) -> None:
    admin = tenant_admin(api, tenant)
    route = connectors_route(tenant, "src")
    config = {"tables": ["a", "b"], "fail_at": "b"}
    create_connector(api, admin, tenant, "src", type="listsource", config=config, errors_tolerance="none")
    report = crawl(runtime, tenant, "src")
    assert report.failed and [t.outcome for t in report.tasks] == ["failed"]
    # The plugin's own exception text and its traceback are for the operator log; the tenant sees a class.
    assert report.tasks[0].error == str(INTERNAL)
    status = api.get(f"{route}/status", headers=admin).json()
    # As in Connect: the task FAILED with its trace, the connector itself is still RUNNING.
    assert status["connector"]["state"] == ConnectorState.RUNNING.value and status["type"] == "source"
    [task] = status["tasks"]
    assert task["state"] == "FAILED" and task["trace"] == str(INTERNAL) and task["worker_id"]
    assert "source unreachable" not in json.dumps(status) and "in poll" not in json.dumps(status)

    again = crawl(runtime, tenant, "src")  # a FAILED task is not run again by itself
    assert [(t.outcome, t.records) for t in again.tasks] == [("skipped", 0)]
    missing = api.post(f"{route}/tasks/1/restart", headers=admin)
    assert missing.status_code == 404 and missing.json()["field"] == "task_id"
    restarted_task = api.post(f"{route}/tasks/0/restart", headers=admin)
    assert restarted_task.status_code == 200 and restarted_task.json()["state"] == "RUNNING"
    assert api.get(f"{route}/tasks/0/status", headers=admin).json()["state"] == "RUNNING"
    assert [t.outcome for t in crawl(runtime, tenant, "src").tasks] == ["failed"]  # it ran, and failed again

    assert api.post(f"{route}/pause", headers=admin).status_code == 200
    with pytest.raises(CrawlRefused):
        crawl(runtime, tenant, "src")
    assert api.delete(f"{route}/offsets", headers=admin).json() == {"reset": []}
    restarted = api.post(f"{route}/activate", params={"include_tasks": "true", "only_failed": "true"}, headers=admin)
    assert restarted.status_code == 200
    status = restarted.json()
    assert status["connector"]["state"] == "RUNNING" and status["tasks"][0]["state"] == "RUNNING"
    assert status["tasks"][0]["trace"] is None

    # Who restarted what is in the tenant's audit table.
    rows = read(tenant_audit_path(api.app.state.ctx, tenant), AuditQuery(action="connector.task.", limit=10))  # type: ignore[attr-defined]
    assert [r.action for r in rows] == ["connector.task.restart"]
