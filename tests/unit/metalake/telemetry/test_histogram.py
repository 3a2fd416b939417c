"""The bulk histogram: observations with their counts, exposed as Prometheus' cumulative buckets, count and sum."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, generate_latest

from metalake.telemetry.histogram import BulkHistogram
from tests._support.scrape import sample


def test_counts_land_in_the_first_bucket_whose_bound_holds_them_cumulatively() -> None:
    registry = CollectorRegistry(auto_describe=False)
    histogram = BulkHistogram("t_seconds", "test", ("store",), (0.5, 1.0, 30.0))
    registry.register(histogram)
    histogram.observe_many([(0.5, 2), (0.7, 1), (31.0, 3), (2.0, 0)], {"store": "delta"})
    histogram.observe(1.0, {"store": "delta"})
    text = generate_latest(registry).decode()
    labels = {"store": "delta"}
    buckets = [sample(text, "t_seconds_bucket", {**labels, "le": le}) for le in ("0.5", "1.0", "30.0", "+Inf")]
    assert buckets == [2, 4, 4, 7]  # a value on a bound counts in it ("le"); nothing for a count of 0
    assert sample(text, "t_seconds_count", labels) == 7
    assert sample(text, "t_seconds_sum", labels) == 0.5 * 2 + 0.7 + 31.0 * 3 + 1.0
