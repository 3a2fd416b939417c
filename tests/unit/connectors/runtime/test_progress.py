"""A crawl's progress: the runner reports after each confirmed batch and at its end; the terminal lines sum the
tasks' counters (tables read of those listed, events published) and are throttled, the end always shown."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from connectors.runtime.errors import ErrorPolicy
from connectors.runtime.progress import ProgressLines
from connectors.runtime.source_runner import CrawlSummary, SourceRunner
from connectors.runtime.transforms import Chain
from control.connectors.plugin import ConnectorContext
from control.connectors.records import Tolerance
from tests._support.runtime_fakes import FakeCounter, FakeOffsets, FakePublisher
from tests._support.runtime_plugins import ListSource, ListSourceConfig


class CountingSource(ListSource):
    """ListSource that counts the tables it has yielded, as the PostgreSQL crawler counts what it read."""

    def poll(self, offsets: Mapping[str, Mapping[str, Any]]) -> Any:
        self.read = 0
        for record in super().poll(offsets):
            self.read += 1
            yield record

    def progress(self) -> Mapping[str, int]:
        return {"tables_read": getattr(self, "read", 0), "tables_total": len(self.config.tables)}


def test_the_runner_reports_after_each_batch_and_at_the_end() -> None:
    calls: list[tuple[int, int, dict[str, int]]] = []
    connector = CountingSource(ListSourceConfig(tables=["a", "b", "c"]), ConnectorContext("acme", "c1"))
    runner = SourceRunner(
        connector,
        chain=Chain("acme"),
        policy=ErrorPolicy(Tolerance.ALL, tenant="acme", connector="c1", plugin="list", counter=FakeCounter()),
        publisher=cast(Any, FakePublisher()),
        offsets=cast(Any, FakeOffsets()),
        batch_size=2,
        on_progress=lambda summary, progress: calls.append((summary.records, summary.batches, dict(progress))),
    )
    runner.run()
    # After the first batch (2 records), the second (1) and the end.
    assert [(records, batches) for records, batches, _ in calls] == [(2, 1), (3, 2), (3, 2)]
    assert calls[-1][2] == {"tables_read": 3, "tables_total": 3}


def test_lines_sum_the_tasks_and_are_throttled_but_the_end_is_always_shown() -> None:
    now = [0.0]
    lines: list[str] = []
    show = ProgressLines(lines.append, every_s=1.0, clock=lambda: now[0])
    first, second = CrawlSummary("acme", "pg", 0, records=10), CrawlSummary("acme", "pg", 1, records=5)
    show(first, {"tables_read": 2, "tables_total": 4, "databases_done": 0, "databases_total": 1})
    now[0] = 0.5
    show(second, {"tables_read": 1, "tables_total": 3})  # within the second: not shown
    assert lines == ["crawl tables 2/4, databases 0/1, events published 10 (1 task(s), 0.0s)"]
    second.seconds = 0.4  # the task's end
    show(second, {"tables_read": 3, "tables_total": 3})
    assert lines[-1] == "crawl tables 5/7, databases 0/1, events published 15 (2 task(s), 0.5s)"
    now[0] = 2.0
    first.records, first.dead_lettered = 12, 1
    show(first, {"tables_read": 4, "tables_total": 4, "databases_done": 1, "databases_total": 1})
    assert lines[-1] == "crawl tables 7/7, databases 1/1, events published 17, dead letters 1 (2 task(s), 2.0s)"
    assert len(lines) == 3


def test_a_source_without_counters_shows_events_only() -> None:
    lines: list[str] = []
    ProgressLines(lines.append, clock=lambda: 0.0)(CrawlSummary("acme", "x", records=3, seconds=1.0), {})
    assert lines == ["crawl events published 3 (1 task(s), 0.0s)"]
