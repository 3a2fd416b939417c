"""The provisioning queue's rules without a stack: which tenants are due (queued, not failed; a waiting step retried
after ``waiting_retry_s``; documents from before ``queued_at`` by their state), oldest queued first, and the age of
the oldest."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from control.provisioning.queue import due, oldest_seconds, queued, queued_since
from tenants.model import Tier
from tenants.registry import TenantRecord, TenantState

NOW = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)


def _tenant(state: TenantState, *, queued_at: datetime | None = NOW, error: str | None = None) -> TenantRecord:
    return TenantRecord("acme", Tier.POOLED, state, None, NOW, NOW, error=error, queued_at=queued_at)


def test_queued_work_is_due_and_a_tenant_without_work_is_not() -> None:
    assert due(_tenant(TenantState.PROVISIONING), NOW, 30.0)
    assert due(_tenant(TenantState.DELETING), NOW, 30.0)
    # POST .../provision of an active tenant with a step added since: queued too.
    assert due(_tenant(TenantState.ACTIVE), NOW, 30.0)
    assert not due(_tenant(TenantState.ACTIVE, queued_at=None), NOW, 30.0)
    assert not due(_tenant(TenantState.SUSPENDED, queued_at=None), NOW, 30.0)


def test_a_document_from_before_queued_at_is_queued_by_its_state() -> None:
    legacy = _tenant(TenantState.PROVISIONING, queued_at=None)
    assert queued(legacy) and due(legacy, NOW, 30.0)
    assert queued_since(legacy) == NOW  # its last change
    naive = replace(legacy, updated_at=datetime(2026, 11, 30, 8, 0))  # pymongo's naive UTC
    assert queued_since(naive) == datetime(2026, 11, 30, 8, 0, tzinfo=UTC)


def test_a_failed_run_waits_for_an_operator_and_a_waiting_step_is_retried_later() -> None:
    failed = _tenant(TenantState.PROVISIONING, error="step lake: lake init exited with 1: boom")
    assert not due(failed, NOW + timedelta(days=1), 30.0)
    waiting = _tenant(TenantState.PROVISIONING, error="step lake waiting: the shared tables are not registered")
    assert not due(waiting, NOW + timedelta(seconds=29), 30.0)
    assert due(waiting, NOW + timedelta(seconds=30), 30.0)


def test_the_oldest_age_counts_failed_work_and_is_zero_for_none() -> None:
    old = replace(_tenant(TenantState.DELETING, error="step lake: boom"), queued_at=NOW - timedelta(minutes=40))
    assert oldest_seconds([], NOW) == 0.0
    assert oldest_seconds([_tenant(TenantState.PROVISIONING), old], NOW) == 2400.0
    assert oldest_seconds([_tenant(TenantState.PROVISIONING, queued_at=NOW + timedelta(seconds=5))], NOW) == 0.0
