"""The provisioning queue in the lake worker's metrics: its depth and the age of its oldest queued tenant, read at
scrape time (0 when it is empty), and gone once the worker stops watching."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from control.provisioning.queue import oldest_seconds
from metalake.telemetry.exposition import install_meter_provider, render
from processors.lake.provisioning import watch_queue
from tenants.model import Tier
from tenants.registry import TenantRecord, TenantState
from tests._support.scrape import sample

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


class _Queue:
    def __init__(self) -> None:
        self.records: list[TenantRecord] = []

    def depth(self) -> int:
        return len(self.records)

    def oldest(self, now: datetime) -> float:
        return oldest_seconds(self.records, now)


def _read() -> tuple[float, float]:
    text = render().decode()
    return (
        sample(text, "metalake_provisioning_queue_depth", {}),
        sample(text, "metalake_provisioning_oldest_seconds", {}),
    )


def test_depth_and_oldest_age_are_read_at_each_scrape() -> None:
    install_meter_provider()
    queue = _Queue()
    unwatch = watch_queue(queue, lambda: NOW)  # type: ignore[arg-type]
    try:
        assert _read() == (0, 0)
        # pymongo hands out naive UTC datetimes.
        naive = NOW.replace(tzinfo=None)
        queue.records = [
            TenantRecord(
                "a", Tier.POOLED, TenantState.PROVISIONING, None, naive, naive, queued_at=naive - timedelta(minutes=5)
            ),
            TenantRecord("b", Tier.DEDICATED, TenantState.DELETING, None, naive, naive, queued_at=naive),
        ]
        assert _read() == (2, 300)
    finally:
        unwatch()
    assert "metalake_provisioning_queue_depth" not in render().decode()
