"""Helpers for integration tests (on sys.path through pytest's ``pythonpath``)."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, TypeVar

import trino

T = TypeVar("T")


# The longest pause between two probes. Waits in the suite last from milliseconds to minutes, and a probe is often a
# Trino query (planning and Delta metadata on a coordinator the other lane shares): at a fixed 0.25 s a one-minute
# wait ran 240 of them on two saturated cores. Backing off to 2 s costs a wait at most 2 s more.
MAX_INTERVAL_S = 2.0


def wait_for(what: str, probe: Callable[[], T | None], timeout_s: float = 120.0, interval_s: float = 0.25) -> T:
    """Poll until ``probe`` returns a truthy value; fail with ``what`` after the timeout (never hang).

    The first pause is ``interval_s``; each next one half as long again, up to ``MAX_INTERVAL_S`` (or ``interval_s``
    when it is longer): what comes quickly is seen quickly, what takes a minute is not probed hundreds of times."""
    deadline = time.monotonic() + timeout_s
    last: T | None = None
    pause, longest = interval_s, max(interval_s, MAX_INTERVAL_S)
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(max(0.0, min(pause, deadline - time.monotonic())))
        pause = min(pause * 1.5, longest)
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
