"""The erasure queue in the lake worker's metrics: its depth and the age of its oldest pending erasure, read at
scrape time (0 when it is empty), and gone once the worker stops watching."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from metalake.telemetry.exposition import install_meter_provider, render
from processors.lake.worker import watch_queue
from tests._support.scrape import sample

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)


class _Store:
    def __init__(self) -> None:
        self.pending: list[datetime] = []

    def count_unfinished(self) -> int:
        return len(self.pending)

    def oldest_unfinished(self) -> datetime | None:
        return min(self.pending, default=None)


def _read() -> tuple[float, float]:
    text = render().decode()
    return sample(text, "metalake_erasure_queue_depth", {}), sample(text, "metalake_erasure_oldest_seconds", {})


def test_depth_and_oldest_age_are_read_at_each_scrape() -> None:
    install_meter_provider()
    store = _Store()
    unwatch = watch_queue(store, lambda: NOW)  # type: ignore[arg-type]
    try:
        assert _read() == (0, 0)
        # pymongo hands out naive UTC datetimes.
        naive = NOW.replace(tzinfo=None)
        store.pending = [naive - timedelta(minutes=5), naive - timedelta(seconds=30)]
        assert _read() == (2, 300)
    finally:
        unwatch()
    assert "metalake_erasure_queue_depth" not in render().decode()
