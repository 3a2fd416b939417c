"""A histogram that takes many equal observations at once, exposed by prometheus-client.

``metalake_freshness_seconds`` records every event of the streaming job, 20,000 per batch and store at most: through
an OpenTelemetry instrument that is one ``record`` per event at about 25 microseconds each (measured with
opentelemetry-sdk 1.45, exemplars off or on alike), half a second of a batch's driver time. Here the lake query's
events of one Kafka millisecond are one observation with their count, and an observation costs a bisect under a
lock. The exposition is the same as the exporter's: ``_bucket`` (cumulative, ``le`` as the exporter writes it),
``_count`` and ``_sum``.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence

from prometheus_client.core import HistogramMetricFamily
from prometheus_client.registry import Collector


class BulkHistogram(Collector):
    """Cumulative histograms by label values; register it in a prometheus-client registry to expose it."""

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str], buckets: Sequence[float]) -> None:
        self.name, self._documentation = name, documentation
        self._labelnames = tuple(labelnames)
        self._bounds = tuple(sorted(buckets))
        self._lock = threading.Lock()
        # label values -> (per-bucket counts, the last one past every bound; sum)
        self._series: dict[tuple[str, ...], tuple[list[int], list[float]]] = {}

    def observe(self, value: float, labels: Mapping[str, str], count: int = 1) -> None:
        """``count`` observations of ``value``."""
        self.observe_many([(value, count)], labels)

    def observe_many(self, observations: Iterable[tuple[float, int]], labels: Mapping[str, str]) -> None:
        """``(value, count)`` pairs of one series, summed here first and added under the lock once."""
        bounds = self._bounds
        local, added = [0] * (len(bounds) + 1), 0.0
        for value, count in observations:
            if count > 0:
                local[bisect.bisect_left(bounds, value)] += count  # the first bound >= value: Prometheus' "le"
                added += value * count
        if not any(local):
            return
        key = tuple(labels[name] for name in self._labelnames)
        with self._lock:
            counts, total = self._series.setdefault(key, ([0] * (len(bounds) + 1), [0.0]))
            for index, n in enumerate(local):
                counts[index] += n
            total[0] += added

    def collect(self) -> Iterator[HistogramMetricFamily]:
        family = HistogramMetricFamily(self.name, self._documentation, labels=self._labelnames)
        with self._lock:
            series = [(key, list(counts), total[0]) for key, (counts, total) in self._series.items()]
        for key, counts, total in series:
            cumulative, buckets = 0, []
            for bound, n in zip([*map(str, self._bounds), "+Inf"], counts, strict=True):
                cumulative += n
                buckets.append((bound, float(cumulative)))
            family.add_metric(list(key), buckets, sum_value=total)
        yield family

    def describe(self) -> list[HistogramMetricFamily]:
        return []  # no name check against other collectors: the registry's instruments are the exporter's


__all__ = ["BulkHistogram"]
