"""A crawl's progress on a terminal (``metalake connect crawl --follow``): one line per update, throttled, summed over
the crawl's tasks: tables read of those listed, databases done, events Kafka confirmed, dead letters, elapsed."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from connectors.runtime.source_runner import CrawlSummary


class ProgressLines:
    """Receives :data:`~connectors.runtime.source_runner.Progress` calls from the tasks' threads; writes a line
    through ``echo`` at most every ``every_s`` (and always when a task reports its end, so the last line is exact)."""

    def __init__(
        self, echo: Callable[[str], None], every_s: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._echo, self._every_s, self._clock = echo, every_s, clock
        self._started = clock()
        self._last: float | None = None
        self._tasks: dict[int, tuple[CrawlSummary, dict[str, int]]] = {}
        self._lock = threading.Lock()

    def __call__(self, summary: CrawlSummary, progress: Mapping[str, int]) -> None:
        with self._lock:
            self._tasks[summary.task] = (summary, dict(progress))
            now = self._clock()
            # A task's end: its seconds are set. Show it even within the throttle.
            final = summary.seconds > 0
            if not final and self._last is not None and now - self._last < self._every_s:
                return
            self._last = now
            self._echo(self.line(now))

    def line(self, now: float | None = None) -> str:
        summaries = [s for s, _ in self._tasks.values()]
        counters: dict[str, int] = {}
        for _, progress in self._tasks.values():
            for key, value in progress.items():
                counters[key] = counters.get(key, 0) + value
        parts = []
        if "tables_total" in counters:
            parts.append(f"tables {counters.get('tables_read', 0)}/{counters['tables_total']}")
        if "databases_total" in counters:
            parts.append(f"databases {counters.get('databases_done', 0)}/{counters['databases_total']}")
        parts.append(f"events published {sum(s.records for s in summaries)}")
        dead = sum(s.dead_lettered for s in summaries)
        if dead:
            parts.append(f"dead letters {dead}")
        elapsed = (self._clock() if now is None else now) - self._started
        return f"crawl {', '.join(parts)} ({len(self._tasks)} task(s), {elapsed:.1f}s)"
