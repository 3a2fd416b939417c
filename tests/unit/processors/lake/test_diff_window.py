"""Reconcile's comparison and the recent window shared with prune."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from processors.lake import window
from processors.lake.diff import compare

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
