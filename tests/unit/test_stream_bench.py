"""The pure parts of bench/stream_bench.py and its baseline: the log readers, the done detection, the Delta log
reader, the summary and its markdown, the stack-job check, the baseline's schema."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

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

LAKE = {"event": "enrichment.lake_batch_done", "query": "bench-x-lake", "batch_id": 0, "events": 5, "dead_letters": 0}
PROJECTION = {"event": "enrichment.projection_batch_done", "query": "bench-x-mongo-priority", "records": 3}


def _job_log(path: Path) -> tuple[Any, Any]:
    return bench.BatchLog(path, bench.LAKE_EVENT, "events"), bench.BatchLog(path, bench.PROJECTION_EVENT, "records")


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


def test_job_log_holds_both_kinds_of_batch_lines_complete_lines_only(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(
        "26/11/22 WARN ProcessingTimeExecutor: falling behind\n"
        + json.dumps({"event": "stream.started", "query": "bench-x-lake"})
        + "\n"
        + json.dumps(LAKE)
        + "\n"
        + json.dumps(PROJECTION)
        + "\n"
        + json.dumps(LAKE)[:20]
    )
    lake, projection = _job_log(path)
    lake.poll()
    projection.poll()
    assert lake.total() == 5 and projection.total() == 3
    with path.open("a") as f:
        f.write(json.dumps(LAKE)[20:] + "\n" + json.dumps({**PROJECTION, "query": "bench-x-mongo-bulk"}) + "\n")
    lake.poll()
    projection.poll()
    assert lake.total() == 10 and len(lake.batches) == 2
    # Both projection queries count: MongoDB is done when their records add up.
    assert projection.total() == 6 and {b["query"] for b in projection.batches} == {
        "bench-x-mongo-priority",
        "bench-x-mongo-bulk",
    }


def test_batch_lines_behind_sparks_progress_bar_count(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    bar = "\r[Stage 103:>" + " " * 40 + "(0 + 2) / 3]\r"
    path.write_text(bar + json.dumps(PROJECTION) + "\n" + bar + "\n")
    _, projection = _job_log(path)
    projection.poll()
    assert projection.total() == 3


def test_lake_counts_valid_events_not_dead_letters(tmp_path: Path) -> None:
    path = tmp_path / "job.log"
    path.write_text(json.dumps({**LAKE, "events": 4, "dead_letters": 7}) + "\n")
    lake, _ = _job_log(path)
    lake.poll()
    assert lake.total() == 4


def test_reached_at_is_the_batch_that_completes_the_target() -> None:
    batches = [{"events": 100, "seen": 1.0}, {"events": 150, "seen": 2.5}, {"events": 50, "seen": 4.0}]
    assert bench.reached_at(batches, "events", 100) == 1.0
    assert bench.reached_at(batches, "events", 101) == 2.5
    assert bench.reached_at(batches, "events", 300) == 4.0
    assert bench.reached_at(batches, "events", 301) is None
    assert bench.reached_at([{"records": None, "seen": 1.0}], "records", 1) is None


def _side(tmp_path: Path, lines: list[dict[str, Any]]) -> Any:
    path = tmp_path / "job.log"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    lake, projection = _job_log(path)

    class Alive:
        def poll(self) -> None:
            return None

    return bench.Side("job", ("p", "b"), ["t"], Alive(), {"delta": lake, "mongo": projection}, lambda: True)  # type: ignore[arg-type]


def test_side_wait_reports_delta_and_mongo_separately(tmp_path: Path) -> None:
    side = _side(tmp_path, [LAKE, PROJECTION, PROJECTION])
    assert side.totals() == {"delta": 5, "mongo": 6}
    done = side.wait({"delta": 5, "mongo": 6}, timeout_s=5)
    assert set(done) == {"delta", "mongo"}
    assert side.marks() == {"delta": 1, "mongo": 2}


def test_side_wait_gives_up_when_a_target_is_never_reached(tmp_path: Path) -> None:
    side = _side(tmp_path, [LAKE])
    try:
        side.wait({"delta": 5, "mongo": 1}, timeout_s=0.3)
    except SystemExit as exc:
        assert "not reached" in str(exc)
    else:
        raise AssertionError("expected a time-out")


def test_read_commits_filters_by_time_and_keeps_the_txn_app_ids(tmp_path: Path) -> None:
    log = tmp_path / "_delta_log"
    log.mkdir()

    def commit(version: int, ts: int, app: str | None, operation: str = "WRITE") -> None:
        lines = [{"commitInfo": {"timestamp": ts, "operation": operation, "operationMetrics": {}}}]
        if app:
            lines.append({"txn": {"appId": app, "version": version, "lastUpdated": ts}})
        lines.append({"add": {"path": f"part-{version}.parquet", "stats": "{}"}})
        (log / f"{version:020d}.json").write_text("\n".join(json.dumps(x) for x in lines) + "\n")

    now_ms = int(datetime.now(UTC).timestamp() * 1000)
    commit(0, now_ms - 10_000, "other-lake")
    commit(1, now_ms, "bench-x-lake")
    commit(2, now_ms + 1, "bench-x-lake.health", "MERGE")
    (log / "00000000000000000002.crc").write_text("{}")
    got = bench.read_commits(log, now_ms - 1000, now_ms + 1000)
    assert [(c["version"], c["app_ids"], c["operation"]) for c in got] == [
        (1, ["bench-x-lake"], "WRITE"),
        (2, ["bench-x-lake.health"], "MERGE"),
    ]


def test_delta_log_costs_are_per_lake_batch_and_table() -> None:
    commits = [
        {"table": "events", "operation": "WRITE", "operationMetrics": {}},
        {"table": "assets", "operation": "MERGE", "operationMetrics": {"executionTimeMs": "900", "scanTimeMs": "300",
                                                                      "rewriteTimeMs": "500"}},
        {"table": "events", "operation": "WRITE", "operationMetrics": {}},
        {"table": "assets", "operation": "MERGE", "operationMetrics": {"executionTimeMs": "1100", "scanTimeMs": "500",
                                                                      "rewriteTimeMs": "500"}},
    ]  # fmt: skip
    got = bench.delta_log_costs(commits, batches=2)
    assert got["commits_per_batch"] == 2.0 and got["per_table_per_batch"] == {"assets": 1.0, "events": 1.0}
    assert got["merge_execution_ms"] == 1000.0 and got["delta_rs_write_ms"] is None
    assert bench.delta_log_costs([], batches=0)["commits_per_batch"] is None


def test_step_medians_skip_steps_a_batch_did_not_run() -> None:
    batches = [
        {"steps": {"parse": 1.0, "events": 2.0, "merge_assets": 3.0}},
        {"steps": {"parse": 3.0, "events": 4.0, "merge_assets": 5.0, "health": 0.5}},
        {"steps": {"parse": 2.0, "events": 3.0, "merge_assets": 4.0}},
    ]
    assert bench.step_medians(batches) == {"events": 3.0, "health": 0.5, "merge_assets": 4.0, "parse": 2.0}


def test_stream_job_running_reads_the_stack_status() -> None:
    head = "SERVICE     STATE          PID  PORTS        DETAIL\n"
    assert bench.stream_job_running(head + "stream      running      15481  -            healthy\n") == "15481"
    assert bench.stream_job_running(head + "stream      unhealthy    24572  -   not started yet\n") == "24572"
    assert bench.stream_job_running(head + "stream      stopped          -  -            \n") is None
    assert bench.stream_job_running(head + "kafka       running       2777  9092,9093    healthy\n") is None


def _window(delta: float, mongo: float | None, batches: int = 2) -> dict[str, Any]:
    lake = [{"events": 100, "tenants": 10, "seconds": 0.5, "steps": {"parse": 0.1, "events": 0.2}}] * batches
    out: dict[str, Any] = {
        "events": 200,
        "publish_s": 0.1,
        "load_avg": 1.0,
        "delta": {"seconds": 200 / delta, "events_per_s": delta, "busy_events_per_s": 400.0, "batches": lake},
    }
    if mongo is not None:
        out["mongo"] = {
            "seconds": 200 / mongo,
            "events_per_s": mongo,
            "busy_events_per_s": 800.0,
            "batches": [{"records": 200, "seconds": 0.25, "steps": {"mongo": 0.2}}],
        }
    return out


def _mongo_window(mongo: float) -> dict[str, Any]:
    """A window of a MongoDB-only consumer (baseline_mongo): no Delta side."""
    out = _window(1, mongo)
    del out["delta"]
    return out


class _FakeSide:
    def __init__(self, name: str, results: dict[str, Any]) -> None:
        self.name = name
        self.results = results


def test_summary_markdown_and_goals() -> None:
    fresh = {"probes": 5, "mongo_s": [0.4, 0.5, 0.6, 0.7, 3.0], "trino_assets_s": [2.0, 3.0, 3.5, 4.0]}
    fresh |= {"trino_events_s": [1.0, 1.5, 2.0, 2.5], "unseen_mongo": 0, "unseen_trino_assets": 0}
    fresh |= {"unseen_trino_events": 0}
    job = _FakeSide(
        "job",
        {
            "throughput": {"1": [_window(1200, 1500), _window(1000, 1300)], "10": [_window(1100, 1400)]},
            "delta_log": {"1": bench.delta_log_costs([{"table": "events", "operationMetrics": {}}] * 4, 4)},
            "freshness": [fresh],
        },
    )
    delta_floor = _FakeSide(
        "baseline",
        {
            "throughput": {"1": [_window(1000, None)], "10": [_window(1000, None)]},
            "freshness": [{"probes": 2, "trino_events_s": [1.0], "unseen_trino_events": 1}],
        },
    )
    base = _FakeSide(
        "baseline_mongo",
        {
            "throughput": {"1": [_mongo_window(1000)], "10": [_mongo_window(500)]},
            "freshness": [{"probes": 2, "mongo_s": [0.2, 0.3]}],
        },
    )
    args = argparse.Namespace(tenants=[1, 10])
    summary = bench.summarize(args, [job, delta_floor, base], {"run": "x"})  # type: ignore[arg-type]
    row = summary["throughput"]["1"]["job"]
    assert row["delta"]["events_per_s"] == 1100 and row["mongo"]["events_per_s"] == 1400
    assert row["delta"]["steps"] == {"events": 0.2, "parse": 0.1} and row["delta"]["batches_per_window"] == 2
    assert row["delta_log"]["commits_per_batch"] == 1.0
    assert summary["freshness"]["job"]["mongo"]["p50_s"] == 0.6
    assert summary["freshness"]["baseline"]["trino_events"]["unseen"] == 1
    assert set(summary["freshness"]["baseline_mongo"]) == {"probes", "mongo"}
    assert summary["throughput"]["10"]["baseline_mongo"]["delta"] is None
    goals = {g["goal"]: g["ok"] for g in summary["goals"]}
    assert goals["job events/s into delta >= 1000 at every tenant count"] is True
    assert goals["job events/s into delta flat within 25% over the tenant counts"] is True
    assert goals["job events/s into mongo >= baseline_mongo's"] is True
    assert goals["job events/s into delta >= baseline's"] is True
    assert goals["job freshness mongo p99 <= 2.5 s"] is False
    assert goals["job freshness trino_assets p50 <= 4 s"] is True
    text = bench.markdown(summary)
    assert "| 1 | job | **1100.0** |" in text and "| 10 | baseline_mongo | **-** | - | **500.0** |" in text
    assert "| 10 | ratio job | delta / baseline 1.10, mongo / baseline_mongo 2.80 |" in text
    assert "| job | 5 | 0.60 s | 3.00 s | 3.50 s | 4.00 s | 2.00 s | 2.50 s | 0, 0, 0 |" in text
    assert "| job freshness mongo p99 <= 2.5 s | 3.0 | **no** |" in text
    # Every row of a table has the header's number of cells.
    for table in text.split("\n\n"):
        rows = table.splitlines()
        assert {r.count("|") for r in rows} == {rows[0].count("|")}, table


def test_parse_args_defaults_match_the_issue() -> None:
    args = bench.parse_args([])
    assert args.tenants == [1, 10, 50, 200] and args.rate == 200 and args.fresh_tenants == 50
    assert args.sides == ["job", "baseline", "baseline_mongo"] and not args.allow_running_job
