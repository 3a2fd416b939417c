"""Versions of tag changes made through the API: milliseconds, strictly increasing even when the clock is not."""

from __future__ import annotations

import threading

from api.services.catalog import prefix_filter, tag_clause
from api.services.events import VersionClock


def test_ties_and_steps_back_still_increase() -> None:
    readings = iter([1000, 1000, 999, 1005])
    clock = VersionClock(lambda: next(readings))
    assert [clock.next() for _ in range(4)] == [1000, 1001, 1002, 1005]


def test_a_floor_lifts_this_and_every_later_version() -> None:
    clock = VersionClock(lambda: 1000)
    assert clock.next(at_least=5000) == 5000
    assert clock.next() == 5001
    assert clock.next(at_least=10) == 5002


def test_concurrent_callers_never_share_a_version() -> None:
    clock = VersionClock(lambda: 42)
    seen: list[int] = []
    lock = threading.Lock()

    def take() -> None:
        for _ in range(200):
            value = clock.next()
            with lock:
                seen.append(value)

    threads = [threading.Thread(target=take) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(seen)) == 800


def test_the_name_prefix_is_anchored_and_escaped() -> None:
    assert prefix_filter("a.b*(") == {"$regex": r"^a\.b\*\("}


def test_a_classification_matches_the_tag_and_its_family() -> None:
    assert tag_clause(["PII"], "GDPR") == [
        {"tag": "PII"},
        {"$or": [{"tag": "GDPR"}, {"tag": {"$regex": r"^GDPR\."}}]},
    ]
