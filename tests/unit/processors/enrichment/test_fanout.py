"""The lake batch's commit fan-out: order, concurrency bound, prerequisites and failures, without Spark."""

from __future__ import annotations

import threading
import time

import pytest
from opentelemetry import context as otel_context

from processors.enrichment.fanout import Commit, run_commits


class Log:
    """What ran: starts and ends in order, and the most commits seen running at once."""

    def __init__(self) -> None:
        self.events: list[str] = []
        self.running = 0
        self.most = 0
        self._lock = threading.Lock()

    def commit(self, name: str, seconds: float = 0.0, error: Exception | None = None) -> Commit:
        return self.commit_after(name, (), seconds, error)

    def commit_after(
        self, name: str, after: tuple[str, ...], seconds: float = 0.0, error: Exception | None = None
    ) -> Commit:
        def run() -> None:
            with self._lock:
                self.events.append(f"start {name}")
                self.running += 1
                self.most = max(self.most, self.running)
            time.sleep(seconds)
            with self._lock:
                self.running -= 1
                self.events.append(f"end {name}")
            if error is not None:
                raise error

        return Commit(name, run, after)


def test_one_at_a_time_runs_them_in_the_given_order() -> None:
    log = Log()
    run_commits([log.commit("events"), log.commit("merge_assets"), log.commit("health")], 1)
    assert log.events == [
        "start events",
        "end events",
        "start merge_assets",
        "end merge_assets",
        "start health",
        "end health",
    ]


def test_side_by_side_they_overlap_up_to_the_bound() -> None:
    log = Log()
    started = time.monotonic()
    run_commits([log.commit(f"c{i}", 0.3) for i in range(6)], 3)
    elapsed = time.monotonic() - started
    assert log.most == 3
    assert len(log.events) == 12
    assert elapsed < 6 * 0.3  # not one after the other


def test_a_commit_starts_only_after_its_prerequisites_returned() -> None:
    log = Log()
    run_commits(
        [
            log.commit("merge_assets", 0.2),
            log.commit("merge_incidents", 0.1),
            log.commit("merge_lineage_edges", 0.4),
            log.commit_after("health", ("merge_assets", "merge_incidents")),
        ],
        4,
    )
    start = log.events.index("start health")
    assert log.events.index("end merge_assets") < start
    assert log.events.index("end merge_incidents") < start
    # It does not wait for commits it does not follow.
    assert start < log.events.index("end merge_lineage_edges")


def test_prerequisites_not_in_the_batch_are_ignored() -> None:
    log = Log()
    run_commits([log.commit("merge_incidents"), log.commit_after("health", ("merge_assets", "merge_incidents"))], 4)
    assert log.events[-1] == "end health"


def test_a_failure_fails_the_batch_after_every_running_commit_returned() -> None:
    log = Log()
    with pytest.raises(ValueError, match="boom"):
        run_commits([log.commit("events", 0.3), log.commit("merge_assets", 0.05, ValueError("boom"))], 4)
    assert "end events" in log.events  # the batch did not return while the append was still writing


def test_a_commit_whose_prerequisite_failed_never_starts() -> None:
    log = Log()
    with pytest.raises(RuntimeError, match="incidents"):
        run_commits(
            [
                log.commit("merge_incidents", 0.05, RuntimeError("incidents")),
                log.commit("merge_assets", 0.1),
                log.commit_after("health", ("merge_assets", "merge_incidents")),
            ],
            4,
        )
    assert "start health" not in log.events
    assert "end merge_assets" in log.events


def test_the_first_failure_is_raised_when_several_fail() -> None:
    log = Log()
    with pytest.raises(KeyError, match="first"):
        run_commits([log.commit("a", 0.0, KeyError("first")), log.commit("b", 0.3, ValueError("second"))], 2)


def test_one_at_a_time_a_failure_stops_the_batch() -> None:
    log = Log()
    with pytest.raises(ValueError, match="boom"):
        run_commits([log.commit("events", 0.0, ValueError("boom")), log.commit("merge_assets")], 1)
    assert "start merge_assets" not in log.events


def test_names_must_be_unique() -> None:
    with pytest.raises(ValueError, match="repeat"):
        run_commits([Commit("a", lambda: None), Commit("a", lambda: None)], 2)


def test_each_thread_is_set_up_and_runs_in_the_callers_context() -> None:
    key = otel_context.create_key("batch")
    seen: list[object] = []
    setups: list[str] = []
    token = otel_context.attach(otel_context.set_value(key, "batch-7"))
    try:
        run_commits(
            [Commit(n, lambda: seen.append(otel_context.get_value(key))) for n in ("a", "b", "c")],
            3,
            lambda: setups.append(threading.current_thread().name),
        )
    finally:
        otel_context.detach(token)
    assert seen == ["batch-7"] * 3
    assert len(setups) == 3
    assert all(name.startswith("lake-commit") for name in setups)
