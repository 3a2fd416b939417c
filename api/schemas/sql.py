"""SQL bodies: the request and the JSON form of a result (which the route streams rather than builds)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field

from api.services import sqlquery

MAX_SQL_CHARS = 100_000


class SqlRequest(BaseModel):
    sql: str = Field(
        min_length=1,
        max_length=MAX_SQL_CHARS,
        description="One statement. The tenant's schema is the default schema: `SELECT * FROM assets`.",
        examples=["SELECT urn, name FROM assets WHERE kind = 'table' LIMIT 10"],
    )
    format: sqlquery.Format | None = Field(
        default=None, description="json or csv; default from the Accept header, else json.", examples=["csv"]
    )
    max_rows: int | None = Field(
        default=None, gt=0, description="Stop after this many rows (at most settings.sql.max_rows).", examples=[100]
    )


class QueryResult(BaseModel):
    """The JSON form: the trailer fields follow the rows, since a limit may cut them."""

    columns: list[dict[str, str]]
    rows: list[list[Any]]
    row_count: int
    truncated: bool = Field(description="True when a limit (or a failure) ended the rows early.")
    reason: str | None = Field(description="row_limit, time_limit or error when truncated.")
