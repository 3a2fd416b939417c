"""Reconcile's comparison and the recent window shared with prune."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from processors.lake import window
from processors.lake.diff import compare, compare_health

NOW = datetime(2026, 11, 22, tzinfo=UTC)


def test_compare_sorts_ids_into_missing_extra_behind_ahead() -> None:
    delta = {"a": (1, "e1"), "b": (2, "e2"), "c": (3, "e3"), "d": (4, "e4"), "old": (1, "e")}
    mongo = {"b": (1, "e9"), "c": (3, "e3"), "d": (4, "e5"), "x": (1, "e")}
    diff = compare(delta, mongo, ignore=["old"])
    assert (diff.missing, diff.extra, diff.behind, diff.ahead) == (["a"], ["x"], ["b"], ["d"])
    assert diff.total == 4 and diff.counts() == {"missing": 1, "extra": 1, "behind": 1, "ahead": 1}


def test_a_document_without_version_is_behind() -> None:
    assert compare({"a": (1, "e")}, {"a": (None, None)}).behind == ["a"]


def test_equal_sides_have_no_difference() -> None:
    assert compare({"a": (1, "e")}, {"a": (1, "e")}).total == 0


HELD = ("health", "open_incidents", "health_version", "health_event_id")
DEGRADED = {"health": "degraded", "open_incidents": 1, "health_version": 5, "health_event_id": "e5"}


def test_compare_health_sorts_assets_into_missing_behind_ahead() -> None:
    delta = dict.fromkeys(("same", "lost", "stale", "newer", "edited", "delta-only"), DEGRADED)
    delta["never"] = {"health": "healthy", "open_incidents": 0, "health_version": None, "health_event_id": None}
    mongo = {
        "same": dict(DEGRADED),
        "lost": {},
        "stale": {"health": "healthy", "open_incidents": 0, "health_version": 4, "health_event_id": "e9"},
        "newer": {**DEGRADED, "health_version": 6},
        "edited": {**DEGRADED, "open_incidents": 7},  # the same pair, another value: a hand edit
        "never": {"health": "healthy", "open_incidents": 0},  # a missing field equals null
        "mongo-only": {},
    }
    diff = compare_health(delta, mongo, HELD)
    assert (diff.missing, diff.behind, diff.ahead, diff.extra) == (["lost"], ["stale"], ["edited", "newer"], [])


def test_health_held_without_a_pair_where_delta_has_one_is_behind() -> None:
    mongo = {"a": {"health": "healthy", "open_incidents": 0}}
    assert compare_health({"a": DEGRADED}, mongo, HELD).behind == ["a"]


def test_window_selects_only_old_resolved_incidents() -> None:
    before = window.cutoff(NOW, 30)
    assert before == NOW - timedelta(days=30)
    assert window.prune_filter(before) == {"status": "resolved", "updated_at": {"$lt": before}}
    old = NOW - timedelta(days=31)
    assert window.outside_window({"status": "resolved", "updated_at": old}, before)
    assert window.outside_window({"status": "resolved", "updated_at": old.replace(tzinfo=None)}, before)
    assert not window.outside_window({"status": "opened", "updated_at": old}, before)
    assert not window.outside_window({"status": "resolved", "updated_at": NOW}, before)
    assert not window.outside_window({"status": "resolved", "updated_at": None}, before)
    with pytest.raises(ValueError, match="0 days or more"):
        window.cutoff(NOW, -1)
