"""Freshness per event, exactly: each event's Kafka timestamp against the moment its store's commit returned, in
metalake_freshness_seconds (bucket, count and sum); the lake query learns the timestamps from its batch summary."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import pytest

from metalake.telemetry.exposition import install_meter_provider, render
from processors.enrichment import freshness
from processors.enrichment.summary import BatchSummary
from tests._support.scrape import sample


@pytest.fixture(scope="module", autouse=True)
def _provider() -> None:
    install_meter_provider()


def _series(query: str, store: str) -> dict[str, float]:
    text = render().decode()
    labels = {"query": query, "store": store}
    out = {k: sample(text, f"metalake_freshness_seconds_{k}", labels) for k in ("count", "sum")}
    for le in ("1.0", "2.5", "5.0"):
        out[le] = sample(text, "metalake_freshness_seconds_bucket", {**labels, "le": le})
    return out


def test_the_lake_records_each_event_once_with_its_own_age() -> None:
    now_ms = int(time.time() * 1000)
    freshness.record_counts([(now_ms - 2000, 3), (now_ms - 4000, 1)], freshness.DELTA, "t-lake")
    series = _series("t-lake", "delta")
    assert series["count"] == 4
    assert series["sum"] == pytest.approx(3 * 2 + 4, abs=0.5)
    assert (series["1.0"], series["2.5"], series["5.0"]) == (0, 3, 4)


def test_the_projection_records_each_event_with_a_kafka_time() -> None:
    stamp = datetime.fromtimestamp(time.time() - 1.6, UTC)
    freshness.record_times([stamp, None, stamp], freshness.MONGODB, "t-mongo")
    series = _series("t-mongo", "mongodb")
    assert series["count"] == 2 and series["2.5"] == 2 and series["1.0"] == 0


def test_the_batch_summary_keeps_the_kafka_times_per_state_table_and_drops_a_dropped_tenants() -> None:
    summary = BatchSummary.from_timed(
        (
            ("acme", 3, True, "assets", 1000, 2),
            ("acme", 3, True, "assets", 1001, 1),
            ("acme", 3, True, None, 1000, 4),
            ("acme", 3, False, None, 1000, 5),  # a dead letter: not fresh data
            ("gone", 7, True, "assets", 1000, 6),
            (None, None, False, None, 1000, 1),
        )
    )
    assert (summary.valid, summary.dead, summary.unrouted) == (13, 5, 1)
    assert sorted(summary.kafka_ms("assets")) == [(1000, 2), (1000, 6), (1001, 1)]
    assert summary.kafka_ms(None) == [(1000, 4)]
    kept = summary.without(frozenset({"gone"}))
    assert sorted(kept.kafka_ms("assets")) == [(1000, 2), (1001, 1)] and kept.valid == 7
