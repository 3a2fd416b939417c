"""Helpers for integration tests (on sys.path through pytest's ``pythonpath``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import trino

T = TypeVar("T")


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 120.0, interval_s: float = 0.25) -> T:
    """Poll until ``probe`` returns a truthy value; fail with ``what`` after the timeout (never hang)."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(interval_s)
    raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what} (last: {last!r})")


def trino_rows(cursor: Any, sql: str, params: list[Any] | None = None) -> list[tuple[Any, ...]] | None:
    """Rows of a query, or None while the tenant's schema or table is not registered yet."""
    try:
        cursor.execute(sql, params or [])
        return [tuple(r) for r in cursor.fetchall()]
    except trino.exceptions.TrinoUserError as exc:
        if exc.error_name in ("SCHEMA_NOT_FOUND", "TABLE_NOT_FOUND"):
            return None
        raise
