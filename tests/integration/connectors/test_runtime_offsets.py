"""Source offsets in the compacted topic, and the source runner resuming from them, on the real Kafka."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from kafka_tail import mark, of_tenant, read_since
from worker_helpers import ADMIN

from connectors.runtime.context import Runtime
from connectors.runtime.source_runner import CrawlRefused, crawl
from control.connectors.store import ConnectorState
from metalake.settings import Settings
from tenants.naming import PRIORITY_TOPIC

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
    runtime: Runtime, worker: TestClient, settings: Settings, tenant: str
) -> None:
    spec = {"type": "listsource", "config": {"tables": ["a", "b", "c"]}}
    assert worker.put(f"/connectors/{tenant}/src", json=spec, headers=ADMIN).status_code == 201
    marks = mark(settings, PRIORITY_TOPIC)
    first = crawl(runtime, tenant, "src")
    assert (first.records, first.batches, first.deletions) == (3, 2, 0)  # batch size 2
    stored = worker.get(f"/connectors/{tenant}/src/offsets", headers=ADMIN).json()["offsets"]
    assert stored == [{"partition": f"table={t}", "offset": {"version": 1}} for t in "abc"]

    spec["config"] = {"tables": ["a", "b"]}  # c was dropped at the source
    assert worker.put(f"/connectors/{tenant}/src", json=spec, headers=ADMIN).status_code == 200
    second = crawl(runtime, tenant, "src")
    assert (second.records, second.deletions) == (1, 1)
    assert runtime.offsets.load(tenant, "src") == {"table=a": {"version": 1}, "table=b": {"version": 1}}
    records = read_since(settings, PRIORITY_TOPIC, marks, of_tenant(tenant), expect=4)
    assert [r.headers["ce_type"].rsplit(b".", 2)[-2] for r in records].count(b"deleted") == 1
    assert len(records) == 4


def test_a_failing_task_is_failed_with_its_trace_and_skipped_until_restarted(
    runtime: Runtime, worker: TestClient, tenant: str
) -> None:
    spec = {"type": "listsource", "config": {"tables": ["a", "b"], "fail_at": "b"}, "errors_tolerance": "none"}
    assert worker.put(f"/connectors/{tenant}/src", json=spec, headers=ADMIN).status_code == 201
    report = crawl(runtime, tenant, "src")
    assert report.failed and [t.outcome for t in report.tasks] == ["failed"]
    assert "source unreachable" in str(report.tasks[0].error)
    status = worker.get(f"/connectors/{tenant}/src/status", headers=ADMIN).json()
    # As in Connect: the task FAILED with its trace, the connector itself is still RUNNING.
    assert status["connector"]["state"] == ConnectorState.RUNNING.value and status["type"] == "source"
    [task] = status["tasks"]
    assert task["state"] == "FAILED" and task["trace"].startswith("RuntimeError: source unreachable")
    assert ", in poll" in task["trace"] and task["worker_id"]

    again = crawl(runtime, tenant, "src")  # a FAILED task is not run again by itself
    assert [(t.outcome, t.records) for t in again.tasks] == [("skipped", 0)]
    assert worker.post(f"/connectors/{tenant}/src/tasks/1/restart", headers=ADMIN).status_code == 404
    assert worker.post(f"/connectors/{tenant}/src/tasks/0/restart", headers=ADMIN).status_code == 204
    assert worker.get(f"/connectors/{tenant}/src/tasks/0/status", headers=ADMIN).json()["state"] == "RUNNING"
    assert [t.outcome for t in crawl(runtime, tenant, "src").tasks] == ["failed"]  # it ran, and failed again

    assert worker.put(f"/connectors/{tenant}/src/pause", headers=ADMIN).status_code == 202
    with pytest.raises(CrawlRefused):
        crawl(runtime, tenant, "src")
    assert worker.delete(f"/connectors/{tenant}/src/offsets", headers=ADMIN).json() == {"reset": []}
    restarted = worker.post(
        f"/connectors/{tenant}/src/restart", params={"includeTasks": "true", "onlyFailed": "true"}, headers=ADMIN
    )
    assert restarted.status_code == 204
    status = worker.get(f"/connectors/{tenant}/src/status", headers=ADMIN).json()
    assert status["connector"]["state"] == "RUNNING" and status["tasks"][0]["state"] == "RUNNING"
    assert "trace" not in status["tasks"][0]
