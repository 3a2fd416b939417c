"""Delta commit conflicts (a lake command beside the job) are retried; other errors are not."""

from __future__ import annotations

import pytest
from delta.exceptions import ConcurrentAppendException, MetadataChangedException

from processors.enrichment import commits
from processors.enrichment.commits import CONFLICT_ATTEMPTS, retry_conflicts
from tests._support.sleeps import record_sleeps


@pytest.fixture(autouse=True)
def no_sleep(monkeypatch: pytest.MonkeyPatch) -> None:
    record_sleeps(monkeypatch, commits)


def test_a_conflict_is_retried_until_the_commit_goes_through() -> None:
    calls: list[int] = []

    def commit() -> None:
        calls.append(1)
        if len(calls) < 3:
            raise ConcurrentAppendException("a concurrent MERGE added data")

    retry_conflicts(commit, "assets")
    assert len(calls) == 3


def test_a_table_created_concurrently_is_retried() -> None:
    calls: list[int] = []

    def create() -> None:
        calls.append(1)
        if len(calls) == 1:
            raise MetadataChangedException("the metadata of the Delta table has been changed by a concurrent update")

    retry_conflicts(create, "*")
    assert len(calls) == 2


def test_a_persistent_conflict_is_raised_after_the_last_attempt() -> None:
    calls: list[int] = []

    def commit() -> None:
        calls.append(1)
        raise ConcurrentAppendException("again")

    with pytest.raises(ConcurrentAppendException):
        retry_conflicts(commit, "assets")
    assert len(calls) == CONFLICT_ATTEMPTS


def test_other_errors_are_not_retried() -> None:
    calls: list[int] = []

    def commit() -> None:
        calls.append(1)
        raise ValueError("schema mismatch")

    with pytest.raises(ValueError, match="schema mismatch"):
        retry_conflicts(commit, "assets")
    assert calls == [1]
