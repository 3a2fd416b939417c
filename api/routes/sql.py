"""``POST /v1/tenants/{tenant}/sql``: SQL for dashboards, run in Trino as the tenant's identity.

Only the tenant's schema is readable (Trino's access rules, see docs/serving.md). PII-tagged columns are masked
unless the token carries the ``pii:read`` scope, which runs the query as the tenant's PII user; ``audit`` and ``_dlq``
are readable with ``tenant:admin`` only (the tenant's admin user). Rows stream as JSON
(default) or CSV (``"format": "csv"`` or ``Accept: text/csv``), within ``settings.sql`` row and time limits. Trino calls
run on their own pool, at most ``settings.sql.max_concurrent_per_tenant`` per tenant (api/services/trinopool.py).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Header
from fastapi.responses import StreamingResponse
from starlette import types as asgi

from api.context import ContextDep
from api.deps import SqlReader
from api.problems import problem_doc
from api.schemas.sql import QueryResult, SqlRequest
from api.services import sqlquery
from api.services.trinopool import Slot
from control.auth.principal import Scope

router = APIRouter(prefix="/v1/tenants/{tenant}", tags=["sql"])

# Granted per client (``pii`` at creation), never by a role, and platform:admin does not imply it: PII in clear is
# always a deliberate grant.
PII_SCOPE = Scope.PII_READ.value


QUERY_ERRORS: dict[int | str, dict[str, Any]] = {
    400: problem_doc("the SQL is invalid (Trino's message), or reads what the tenant may not read", "sql-error", 400),
    401: problem_doc("missing or invalid access token", "invalid-token", 401),
    403: problem_doc("the token lacks sql:read", "insufficient-scope", 403),
    404: problem_doc("no such tenant", "tenant-not-found", 404),
    422: problem_doc("invalid request, or the query did not finish within the time limit", "sql-time-limit", 422),
    429: problem_doc(
        "rate limit exceeded, or the tenant already runs settings.sql.max_concurrent_per_tenant queries (SQL and "
        "share links together; Retry-After says when to retry)",
        "sql-concurrency-limit",
        429,
    ),
    502: problem_doc("Trino failed the query", "trino-error", 502),
    503: problem_doc("Trino is unreachable, or every query slot is taken (sql-busy)", "trino-unavailable", 503),
}

RESULT_EXAMPLE = {
    "columns": [{"name": "email", "type": "varchar"}, {"name": "age", "type": "integer"}],
    "rows": [["****", 31], ["****", 42]],
    "row_count": 2,
    "truncated": False,
    "reason": None,
}
RESULT_CONTENT: dict[str, Any] = {
    "application/json": {"example": RESULT_EXAMPLE},
    "text/csv": {"schema": {"type": "string"}, "example": "email,age\r\n****,31\r\n****,42\r\n"},
}


def limits_for(ctx: ContextDep, max_rows: int | None) -> sqlquery.Limits:
    ceiling = ctx.settings.sql.max_rows
    return sqlquery.Limits(min(max_rows or ceiling, ceiling), ctx.settings.sql.timeout_s)


async def run_query(
    slot: Slot, start: Callable[[], sqlquery.RunningQuery], fmt: sqlquery.Format, **headers: str
) -> StreamingResponse:
    """Start the query on the slot (the Trino pool), then stream its rows; the slot is freed when the response ends,
    or now if the query failed to start."""
    try:
        query = await slot.run(start)
    except BaseException:
        slot.finish()
        raise
    return streaming(slot, query, fmt, **headers)


def streaming(slot: Slot, query: sqlquery.RunningQuery, fmt: sqlquery.Format, **headers: str) -> StreamingResponse:
    return _QueryResponse(
        slot,
        query,
        _body(slot, query, fmt),
        media_type=sqlquery.MEDIA_TYPES[fmt],
        headers={"Cache-Control": "no-store", **headers},
    )


class _QueryResponse(StreamingResponse):
    """Frees the query's slot however the response ends: Starlette skips a response's background task when the client
    is gone before the first byte (``ClientDisconnect``), and a body never started has no ``finally`` to run."""

    def __init__(self, slot: Slot, query: sqlquery.RunningQuery, body: AsyncIterator[bytes], **kwargs: Any) -> None:  # noqa: ANN401
        super().__init__(body, **kwargs)
        self._slot, self._query = slot, query

    async def __call__(self, scope: asgi.Scope, receive: asgi.Receive, send: asgi.Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            # Cancel the query (unless it ended), close the connection, free the slot: after any step in flight.
            self._slot.finish(self._query.release)


async def _body(slot: Slot, query: sqlquery.RunningQuery, fmt: sqlquery.Format) -> AsyncIterator[bytes]:
    # Each batch of rows is fetched on the Trino pool, never on the pool every route shares.
    try:
        async for chunk in slot.iterate(sqlquery.stream(query, fmt)):
            yield chunk
    finally:
        slot.finish(query.release)


@router.post(
    "/sql",
    summary="Run SQL as the tenant",
    description="Runs one SQL statement in Trino as the tenant's identity: only its schema is readable, PII-tagged "
    "columns are masked unless the token has the pii:read scope. The rows stream as JSON or CSV and stop at the row "
    "and time limits (the query is cancelled); the JSON form ends with row_count, truncated and reason.",
    response_model=QueryResult,
    responses={200: {"content": RESULT_CONTENT}, **QUERY_ERRORS},
)
async def run_sql(
    body: SqlRequest,
    ctx: ContextDep,
    tenant_ctx: SqlReader,
    accept: Annotated[str | None, Header(include_in_schema=False)] = None,
) -> StreamingResponse:
    fmt = sqlquery.negotiate(accept, body.format)
    pii = PII_SCOPE in tenant_ctx.principal.scopes
    # The audit trail and the dead letters (raw payloads) are the tenant administrators', here as in the API.
    admin = tenant_ctx.principal.has(Scope.TENANT_ADMIN)
    tenant, limits = tenant_ctx.tenant, limits_for(ctx, body.max_rows)
    slot = ctx.trino.admit(tenant)
    start = partial(sqlquery.start, ctx.settings, tenant, body.sql, pii=pii, limits=limits, admin=admin)
    return await run_query(slot, start, fmt)
