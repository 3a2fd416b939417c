"""The pure parts of bench/stream_bench.py and its baseline: the log reader, the commit cost figures, the schema."""

from __future__ import annotations

import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

from processors.enrichment.parse import ParsedRow
from processors.enrichment.tables import EVENTS

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[f"bench_{name}"] = module
    spec.loader.exec_module(module)
    return module


bench = _load("stream_bench")
baseline = _load("stream_baseline")


def test_baseline_writes_the_columns_of_the_jobs_events_table() -> None:
    assert baseline.EVENTS.names == EVENTS.fieldNames()


def test_baseline_rows_keep_every_field() -> None:
    when = datetime(2026, 11, 22, 3, 0, tzinfo=UTC)
    row = ParsedRow(
        "acme", True, "e1", "io.metalake.asset.upserted.v1", "/s", "urn:x", when, 3, "{}", None, None, None, None,
        None, "topic", 2, 41, when, "00-ab-cd-01",
    )  # fmt: skip
    table = baseline.events_table([row], when)
    got = table.to_pylist()[0]
    assert got["event_id"] == "e1" and got["version"] == 3 and got["kafka_partition"] == 2
    assert got["kafka_offset"] == 41 and got["event_date"] == when.date() and got["traceparent"] == "00-ab-cd-01"


def test_batch_log_reads_complete_batch_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    done = {"event": "enrichment.batch_done", "records": 5, "tenants": 1, "seconds": 1.0, "steps": {}}
    path.write_text(
        "26/11/22 WARN ProcessingTimeExecutor: falling behind\n"
        + json.dumps({"event": "enrichment.tenant_written"})
        + "\n"
        + json.dumps(done)
        + "\n"
        + json.dumps(done)[:20]
    )
    log = bench.BatchLog(path, "enrichment.batch_done")
    log.poll()
    assert log.records() == 5
    with path.open("a") as f:
        f.write(json.dumps(done)[20:] + "\n")
    log.poll()
    assert log.records() == 10 and len(log.batches) == 2


def test_job_commit_cost_is_per_tenant_of_a_batch() -> None:
    batches = [
        {"tenants": 10, "steps": {"events": 5.0, "merge_assets": 20.0}},
        {"tenants": 10, "steps": {"events": 7.0, "merge_assets": 30.0}},
        {"tenants": 10, "steps": {"events": 9.0, "merge_assets": 40.0}},
    ]
    assert bench.commit_costs("job", batches) == {"append_s": 0.7, "merge_assets_s": 3.0, "commits_per_batch": 20}


def test_baseline_commit_cost_is_the_median_write() -> None:
    batches = [
        {"tenants": 2, "commits": [{"seconds": 0.01}, {"seconds": 0.05}]},
        {"tenants": 1, "commits": [{"seconds": 0.02}]},
    ]
    assert bench.commit_costs("baseline", batches) == {"append_s": 0.02, "commits_per_batch": 1.5}
