"""Source offsets in the compacted topic, and the source runner resuming from them, on the real Kafka."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient
from kafka_tail import mark, of_tenant, read_since
from worker_helpers import ADMIN

from connectors.runtime.context import Runtime
from connectors.runtime.control import ConnectorState
from connectors.runtime.source_runner import CrawlRefused, crawl
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


def test_a_failing_source_is_marked_failed_and_refused_until_restart(
    runtime: Runtime, worker: TestClient, tenant: str
) -> None:
    spec = {"type": "listsource", "config": {"tables": ["a", "b"], "fail_at": "b"}, "errors_tolerance": "none"}
    assert worker.put(f"/connectors/{tenant}/src", json=spec, headers=ADMIN).status_code == 201
    with pytest.raises(RuntimeError, match="source unreachable"):
        crawl(runtime, tenant, "src")
    status = worker.get(f"/connectors/{tenant}/src/status", headers=ADMIN).json()
    assert status["state"] == ConnectorState.FAILED.value and "source unreachable" in status["error"]
    with pytest.raises(CrawlRefused):
        crawl(runtime, tenant, "src")
    assert worker.put(f"/connectors/{tenant}/src/pause", headers=ADMIN).status_code == 202
    assert worker.delete(f"/connectors/{tenant}/src/offsets", headers=ADMIN).json() == {"reset": []}
