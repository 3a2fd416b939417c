"""Share links of saved queries: ``POST /v1/tenants/{tenant}/shares``, then ``GET /share/{id}/data.csv|data.json``
without a token until the link expires or is revoked (then 410; an unknown link 404). ``GET`` lists the tenant's
links (tenant:read and tenant:admin; the SQL only to tenant:admin), ``DELETE .../shares/{ref}`` revokes one
(tenant:admin, audited).

A link runs its SQL at read time, as the tenant's non-PII identity whatever the creator's scopes (PII never leaves
through a public link), with the same row and time limits as the SQL endpoint. It works only while the API client
that made it is active: revoking (or deleting) the client ends its links, checked at every read.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import partial
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Request
from fastapi import Path as PathParam
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import StreamingResponse

from api import quotas
from api.auth.runtime import AuthRuntime
from api.context import ContextDep
from api.deps import AuthDep, SqlReader, TenantAdmin, TenantReader
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, decode_cursor, encode_cursor
from api.problems import Problem, problem_doc
from api.redaction import secret_path
from api.routes.sql import QUERY_ERRORS, RESULT_CONTENT, limits_for, run_query
from api.schemas.shares import ShareCreate, ShareCreated, SharePage, ShareState, ShareView
from api.schemas.sql import QueryResult
from api.services import audit, sqlquery
from api.services.shares import Share, ShareStore, token_hash
from control.auth.principal import Scope
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantRegistry, TenantState

router = APIRouter(tags=["shares"])

_GONE_STATES = frozenset({TenantState.SUSPENDED, TenantState.DELETING})


@router.post(
    "/v1/tenants/{tenant}/shares",
    status_code=201,
    summary="Create a share link",
    description="Checks the SQL against Trino as the tenant (EXPLAIN, nothing runs), stores it with the tenant and an "
    "expiry, and returns the link's id once. Anyone with the link reads the rows, computed at read time, until it "
    "expires.",
    response_model=ShareCreated,
    responses={**{k: v for k, v in QUERY_ERRORS.items() if k != 502}, **quotas.RESPONSE},
)
async def create_share(body: ShareCreate, ctx: ContextDep, tenant_ctx: SqlReader) -> ShareCreated:
    settings = ctx.settings.sql
    ttl_s = body.expires_in_s or settings.share_default_ttl_s
    if ttl_s > settings.share_max_ttl_s:
        raise Problem(422, "invalid-request", f"expires_in_s: at most {settings.share_max_ttl_s}", field="expires_in_s")
    tenant = tenant_ctx.tenant
    # Refused before Trino validates anything; checked again, under the claim, when the link is written.
    await run_in_threadpool(quotas.check, ctx, tenant, quotas.SHARE_LINKS)
    slot = ctx.trino.admit(tenant)
    try:
        await slot.run(_validate_sql, ctx, tenant, body.sql)
    finally:
        slot.finish()
    store = ShareStore(ctx.mongo[CONTROL_DATABASE])
    # No TTL indexes on FerretDB: expired links are pruned here, where links are made.
    await run_in_threadpool(store.purge_expired, datetime.now(UTC))

    def create() -> tuple[str, Share]:
        with quotas.claim(ctx, tenant, quotas.SHARE_LINKS):
            return store.create(
                tenant,
                body.sql,
                created_by=tenant_ctx.principal.subject,
                ttl=timedelta(seconds=ttl_s),
                max_rows=body.max_rows,
            )

    token, share = await run_in_threadpool(create)
    await run_in_threadpool(audit.record, ctx, tenant, tenant_ctx.principal, "share.create", share.hash, audit.DONE)
    return ShareCreated(
        id=token,
        ref=share.hash,
        expires_at=share.expires_at,
        csv_url=f"/share/{token}/data.csv",
        json_url=f"/share/{token}/data.json",
    )


def creator_active(auth: AuthRuntime, share: Share) -> bool:
    """Whether the API client that made the link is still active. With an external issuer the creator is not one of
    our clients (its tokens' subjects are the issuer's): only expiry and revocation end its links then."""
    if auth.external:
        return True
    record = auth.client_cache.get(share.created_by)
    return record is not None and record.active


def _state(auth: AuthRuntime, share: Share, now: datetime) -> ShareState:
    if share.revoked:
        return "revoked"
    if share.expired(now):
        return "expired"
    return "active" if creator_active(auth, share) else "creator-revoked"


def _view(share: Share, state: ShareState, *, with_sql: bool) -> ShareView:
    return ShareView(
        ref=share.hash,
        state=state,
        created_by=share.created_by,
        created_at=share.created_at,
        expires_at=share.expires_at,
        revoked_at=share.revoked_at,
        revoked_by=share.revoked_by,
        max_rows=share.max_rows,
        sql=share.sql if with_sql else None,
    )


_CURSOR_KIND = "shares"
LIST_ERRORS: dict[int | str, dict[str, Any]] = {
    401: QUERY_ERRORS[401],
    403: problem_doc("the token lacks tenant:read or tenant:admin", "insufficient-scope", 403),
    404: problem_doc("no such tenant", "tenant-not-found", 404),
}


@router.get(
    "/v1/tenants/{tenant}/shares",
    summary="List the tenant's share links",
    description="The tenant's links by reference (the sha256 of the link's id: it opens nothing), oldest reference "
    "first, with their state: active, expired (until pruned), revoked, or creator-revoked (the API client that made "
    "it is revoked or gone). tenant:read sees everything but the SQL; tenant:admin sees the SQL too.",
    response_model=SharePage,
    responses=LIST_ERRORS,
)
async def list_shares(
    ctx: ContextDep, tenant_ctx: TenantReader, auth: AuthDep, limit: Limit = DEFAULT_LIMIT, cursor: CursorParam = None
) -> SharePage:
    after = decode_cursor(_CURSOR_KIND, cursor, 1)
    store = ShareStore(ctx.mongo[CONTROL_DATABASE])
    now = datetime.now(UTC)

    def load() -> list[tuple[Share, ShareState]]:
        shares = store.list(tenant_ctx.tenant, after=after[0] if after else None, limit=limit + 1)
        return [(share, _state(auth, share, now)) for share in shares]

    loaded = await run_in_threadpool(load)
    page = loaded[:limit]
    with_sql = tenant_ctx.principal.has(Scope.TENANT_ADMIN)
    return SharePage(
        items=[_view(share, state, with_sql=with_sql) for share, state in page],
        next_cursor=encode_cursor(_CURSOR_KIND, [page[-1][0].hash]) if len(loaded) > limit else None,
    )


@router.delete(
    "/v1/tenants/{tenant}/shares/{ref}",
    summary="Revoke a share link",
    description="The link stops working at once (its reads answer 410 share-revoked); it stays listed as revoked "
    "until it expires and is pruned. Revoking a revoked link changes nothing. Audited (share.revoke).",
    response_model=ShareView,
    responses={
        **LIST_ERRORS,
        403: problem_doc("the token lacks tenant:admin", "insufficient-scope", 403),
        404: problem_doc("no such tenant, or no such link of this tenant", "share-not-found", 404),
    },
)
async def revoke_share(
    ctx: ContextDep,
    tenant_ctx: TenantAdmin,
    auth: AuthDep,
    ref: Annotated[str, PathParam(pattern="^[0-9a-f]{64}$", description="The link's reference (ref).")],
) -> ShareView:
    store = ShareStore(ctx.mongo[CONTROL_DATABASE])
    share = await run_in_threadpool(store.revoke, tenant_ctx.tenant, ref, by=tenant_ctx.principal.subject)
    if share is None:
        raise Problem(404, "share-not-found", "no such share link", field="ref")
    await run_in_threadpool(
        audit.record, ctx, tenant_ctx.tenant, tenant_ctx.principal, "share.revoke", share.hash, audit.DONE
    )
    return _view(share, "revoked", with_sql=True)


def _validate_sql(ctx: ContextDep, tenant: str, sql: str) -> None:
    """EXPLAIN (TYPE VALIDATE) as the tenant: a syntax error or an unreadable table fails now, not at read time."""
    limits = sqlquery.Limits(1, ctx.settings.sql.timeout_s)
    query = sqlquery.start(ctx.settings, tenant, f"EXPLAIN (TYPE VALIDATE) {sql}", pii=False, limits=limits)
    query.close()


SHARE_ERRORS: dict[int | str, dict[str, Any]] = {
    404: problem_doc("no such share link", "share-not-found", 404),
    410: problem_doc(
        "the share link expired (share-expired) or was revoked, or the API client that made it was (share-revoked)",
        "share-expired",
        410,
    ),
    **{k: v for k, v in QUERY_ERRORS.items() if k in (400, 422, 502, 503)},
    429: problem_doc(
        "too many reads of this link or from this address, or its tenant already runs its maximum of queries; "
        "Retry-After says when to retry",
        "rate-limited",
        429,
    ),
}


@router.get(
    # The link's id opens it: a secret in the path, never logged (api/redaction.py).
    secret_path("/share/{share_id}/data.{extension}", "share_id"),
    summary="Read a share link's rows",
    description="Public (no token): runs the link's SQL now, as the tenant without PII rights, and streams the rows "
    "as CSV (data.csv) or JSON (data.json) within the row and time limits. 404 for an unknown link, 410 once expired "
    "or revoked (the link, or the API client that made it). "
    "Rate-limited per link and per client address (429).",
    response_model=QueryResult,
    responses={200: {"content": RESULT_CONTENT}, **SHARE_ERRORS},
)
async def read_share(
    request: Request,
    ctx: ContextDep,
    auth: AuthDep,
    share_id: Annotated[str, PathParam(min_length=1, max_length=200, description="The link's id.")],
    extension: Annotated[Literal["csv", "json"], PathParam(description="csv or json")],
) -> StreamingResponse:
    # Before any lookup: the peer across links (guessing ids costs too), then the link itself whoever reads it.
    per_link, per_peer = ctx.share_limits
    per_peer.check(f"peer:{request.client.host if request.client else '-'}")
    per_link.check(f"share:{token_hash(share_id)}")
    store = ShareStore(ctx.mongo[CONTROL_DATABASE])
    share = await run_in_threadpool(store.get, share_id)
    if share is None:
        raise Problem(404, "share-not-found", "no such share link", field="share_id")
    if share.revoked:
        raise Problem(410, "share-revoked", "the share link was revoked", field="share_id")
    if share.expired(datetime.now(UTC)):
        raise Problem(410, "share-expired", "the share link expired", field="share_id")
    # Checked at every read (the client cache lives settings.api.client_cache_ttl_s): a link never outlives its maker.
    if not await run_in_threadpool(creator_active, auth, share):
        raise Problem(410, "share-revoked", "the share link was revoked", field="share_id")
    record = await run_in_threadpool(TenantRegistry(ctx.mongo[CONTROL_DATABASE]).get, share.tenant)
    if record is not None and record.state in _GONE_STATES:
        raise Problem(404, "share-not-found", "no such share link", field="share_id")
    limits = limits_for(ctx, share.max_rows)
    # The link's queries count against its tenant's cap: a busy link slows its own tenant only.
    slot = ctx.trino.admit(share.tenant)
    return await run_query(
        slot, partial(sqlquery.start, ctx.settings, share.tenant, share.sql, pii=False, limits=limits), extension
    )
