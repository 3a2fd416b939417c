"""SQL in Trino as a tenant's identity, with row and time limits, streamed as CSV or JSON.

The query runs as :func:`tenants.naming.trino_user` of the tenant (its schema is the default one), so Trino's access
rules decide what it may read: its own schema only, PII-tagged columns masked unless it runs as the ``.pii`` user.
:func:`start` runs the query up to its first row before the HTTP response starts, so SQL errors become problem+json
answers; the rows then stream. A query stops at ``max_rows`` (one more row is read to know it was cut) or at the
deadline (Trino's ``query_max_run_time`` too): the query is cancelled and the JSON form says why it ended.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import logging
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from datetime import time as dtime
from decimal import Decimal
from typing import Any, Literal

import trino
from trino.exceptions import TrinoExternalError, TrinoQueryError, TrinoUserError

from api.problems import Problem
from api.services.csvcells import text_cell
from api.settings import AdminApiSettings
from metalake.telemetry.metrics import TRINO_QUERY
from metalake.trino_connect import connect
from tenants.naming import trino_user
from tenants.trino_schemas import trino_schema

log = logging.getLogger(__name__)

Format = Literal["json", "csv"]
MEDIA_TYPES: dict[Format, str] = {"json": "application/json", "csv": "text/csv; charset=utf-8"}
_FETCH = 500
# Errors that would tell a caller whether another tenant's schema or table exists: one answer for all of them.
_NOT_ACCESSIBLE = frozenset({"PERMISSION_DENIED", "SCHEMA_NOT_FOUND", "TABLE_NOT_FOUND", "CATALOG_NOT_FOUND"})
_TIME_LIMIT = frozenset({"EXCEEDED_TIME_LIMIT", "EXCEEDED_CPU_LIMIT", "ADMINISTRATIVELY_KILLED"})


@dataclass(frozen=True)
class Limits:
    max_rows: int
    timeout_s: float


@dataclass(frozen=True)
class Column:
    name: str
    type: str


@dataclass
class Outcome:
    """How the row stream ended; filled in while it is consumed."""

    rows: int = 0
    truncated: bool = False
    reason: str | None = None  # "row_limit" | "time_limit" | "error"


@dataclass
class RunningQuery:
    """A query whose first rows are read: its columns, and an iterator over all its rows within the limits."""

    columns: list[Column]
    _cursor: Any
    _conn: Any
    _first: list[list[Any]]
    _limits: Limits
    _deadline: float
    outcome: Outcome = field(default_factory=Outcome)
    _finished: bool = field(default=False, init=False)
    _closed: bool = field(default=False, init=False)

    def rows(self) -> Iterator[list[Any]]:
        """Rows up to the limits; cancels the query when it stops early, always closes the connection."""
        pending = list(self._first)
        try:
            while True:
                if not pending:
                    if time.monotonic() >= self._deadline:
                        self._stop("time_limit")
                        return
                    pending = self._cursor.fetchmany(_FETCH)
                    if not pending:
                        self._finished = True
                        return
                row = pending.pop(0)
                if self.outcome.rows >= self._limits.max_rows:
                    self._stop("row_limit")
                    return
                self.outcome.rows += 1
                yield row
        except trino.exceptions.Error as exc:
            # The response has started: the stream ends, and the JSON trailer says why.
            log.info("sql.stream_failed", extra={"error": type(exc).__name__})
            self.outcome.truncated, self.outcome.reason = True, _stream_reason(exc)
            self._finished = True
        finally:
            self.release()

    def release(self) -> None:
        """Cancel the query unless it ended (the client went away: Trino need not finish it); close the connection."""
        if self._closed:
            return
        if not self._finished and not self.outcome.truncated:
            self._cancel()
        self.close()

    def _stop(self, reason: str) -> None:
        self.outcome.truncated, self.outcome.reason = True, reason
        self._cancel()

    def _cancel(self) -> None:
        try:
            self._cursor.cancel()
        except Exception:  # noqa: BLE001 - best effort: the query may have finished meanwhile
            log.debug("sql.cancel_failed")

    def close(self) -> None:
        if not self._closed:
            # From its start (the deadline's origin) to its end; a time limit counts as an error, a row limit not.
            failed = self.outcome.reason in ("error", "time_limit")
            started = self._deadline - self._limits.timeout_s
            TRINO_QUERY.record(time.monotonic() - started, {"outcome": "error" if failed else "ok"})
        self._closed = True
        self._conn.close()


def _stream_reason(exc: Exception) -> str:
    if isinstance(exc, TrinoQueryError) and exc.error_name in _TIME_LIMIT:
        return "time_limit"
    return "error"


def problem_for(exc: Exception) -> Problem:
    """The problem+json answer for a query that failed before its first row. Never names another tenant."""
    if isinstance(exc, TrinoQueryError):
        name = exc.error_name or ""
        if name in _NOT_ACCESSIBLE:
            return Problem(
                400,
                "sql-not-accessible",
                "the query reads a catalog, schema or table that does not exist or that this tenant may not read; "
                "only the tables of the tenant's own schema can be queried",
                field="sql",
            )
        if name in _TIME_LIMIT:
            return Problem(422, "sql-time-limit", "the query did not finish within the time limit", field="sql")
        if isinstance(exc, TrinoUserError):
            return Problem(400, "sql-error", f"{name}: {exc.message}", field="sql")
        if isinstance(exc, TrinoExternalError):
            return Problem(502, "trino-error", f"Trino could not run the query ({name})")
        return Problem(502, "trino-error", f"Trino failed the query ({name})")
    if isinstance(exc, trino.exceptions.DataError):
        return Problem(400, "sql-error", "the result holds a value the client cannot decode", field="sql")
    return Problem(503, "trino-unavailable", "Trino is unreachable; retry shortly")


def start(
    settings: AdminApiSettings, tenant: str, sql: str, *, pii: bool, limits: Limits, admin: bool = False
) -> RunningQuery:
    """Run ``sql`` as the tenant (its PII user if ``pii``, its admin user, which also reads ``audit`` and ``_dlq``,
    if ``admin``: share links never ask for it) up to the first row; raise :class:`Problem` on errors."""
    deadline = time.monotonic() + limits.timeout_s
    # The platform user authenticates and runs the query as the tenant's user (Trino impersonation, which the
    # access rules allow it for tenants' users only).
    conn = connect(
        settings,
        session_user=trino_user(tenant, pii=pii, admin=admin),
        schema=trino_schema(settings, tenant),
        session_properties={"query_max_run_time": f"{max(1, round(limits.timeout_s))}s"},
        request_timeout=max(1.0, limits.timeout_s),
        source="metalake-api-sql",
    )
    try:
        cursor = conn.cursor()
        cursor.execute(sql)
        first = cursor.fetchmany(1)
        description = cursor.description or []
    except (trino.exceptions.Error, trino.exceptions.HttpError, OSError) as exc:
        conn.close()
        TRINO_QUERY.record(time.monotonic() - (deadline - limits.timeout_s), {"outcome": "error"})
        log.info("sql.failed", extra={"tenant": tenant, "error": type(exc).__name__})
        raise problem_for(exc) from None
    columns = [Column(str(d[0]), str(d[1])) for d in description]
    return RunningQuery(columns, cursor, conn, [list(r) for r in first], limits, deadline)


def _scalar(value: Any) -> Any:  # noqa: ANN401
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    if isinstance(value, datetime | date | dtime):
        return value.isoformat()
    if isinstance(value, bytes | bytearray):
        return base64.b64encode(bytes(value)).decode()
    if isinstance(value, dict):
        return {str(k): _scalar(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scalar(v) for v in value]
    return str(value)


def json_stream(columns: Sequence[Column], rows: Iterator[list[Any]], outcome: Outcome) -> Iterator[bytes]:
    """``{"columns": [...], "rows": [[...], ...], "row_count": n, "truncated": b, "reason": r}``, written as the
    rows come: the trailer follows the rows because only then is it known whether a limit cut them."""
    head = json.dumps([{"name": c.name, "type": c.type} for c in columns])
    yield f'{{"columns":{head},"rows":['.encode()
    for i, row in enumerate(rows):
        yield (("," if i else "") + json.dumps([_scalar(v) for v in row])).encode()
    trailer = {"row_count": outcome.rows, "truncated": outcome.truncated, "reason": outcome.reason}
    yield ("]," + json.dumps(trailer)[1:]).encode()


def _csv_cell(value: Any) -> Any:  # noqa: ANN401
    if value is None:
        return ""
    if isinstance(value, bool | int | float | Decimal):
        # Numbers stay numbers: a negative one must not be turned into text.
        return _scalar(value)
    scalar = _scalar(value)
    return text_cell(json.dumps(scalar) if isinstance(scalar, dict | list) else str(scalar))


def csv_stream(columns: Sequence[Column], rows: Iterator[list[Any]]) -> Iterator[bytes]:
    """RFC 4180 CSV with a header row; NULL is the empty field, nested values are JSON; a text cell a spreadsheet
    would run as a formula gets a leading ``'`` (:func:`api.services.csvcells.text_cell`), column names included."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow([text_cell(c.name) for c in columns])
    for row in rows:
        writer.writerow([_csv_cell(v) for v in row])
        if buffer.tell() >= 64 * 1024:
            yield buffer.getvalue().encode()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue().encode()


def stream(query: RunningQuery, fmt: Format) -> Iterator[bytes]:
    """The response body. Closing it early (the client went away) cancels the query, even before the first row."""
    try:
        if fmt == "csv":
            yield from csv_stream(query.columns, query.rows())
        else:
            yield from json_stream(query.columns, query.rows(), query.outcome)
    finally:
        query.release()


def negotiate(accept: str | None, requested: Format | None) -> Format:
    """The body's ``format`` wins; else ``Accept`` (text/csv picks CSV); JSON by default."""
    if requested is not None:
        return requested
    if accept and "text/csv" in accept.lower():
        return "csv"
    return "json"
