"""PII enforced in a customer's own Trino (docs/enforcement.md).

Engine registrations: ``POST /v1/tenants/{tenant}/engines`` (tenant:admin; the key is in the answer only, with the
Trino ``access-control.properties`` that uses it), ``GET`` lists them (tenant:read or tenant:admin), ``DELETE
.../engines/{engine_id}`` removes one (tenant:admin). Creating and removing are audited.

The decision endpoints Trino's OPA access-control plugin calls, ``POST /v1/opa/{key}/<decision>``: no bearer token
(Trino's OPA client cannot send one), the engine's key in the path instead, checked (constant time, against its
SHA-256) before the body is read; a wrong key is a 401. The key names the engine, the engine its tenant: a decision
reads that tenant's tags only. Error answers carry no ``instance`` (it would echo the key).
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Annotated, Any

from fastapi import APIRouter, Path, Request, Response
from fastapi.concurrency import run_in_threadpool
from fastapi.responses import JSONResponse
from pydantic import ValidationError

from api import quotas
from api.context import ApiContext, ContextDep
from api.deps import TenantAdmin, TenantReader
from api.problems import Problem
from api.redaction import RedactSecretPaths, secret_path
from api.schemas.engines import (
    CatalogMapping,
    EngineCreate,
    EngineCreated,
    EngineInfo,
    EnginesView,
    OpaColumn,
    OpaQuery,
)
from api.security import TenantContext
from api.services import audit, opa_decisions
from api.services.enforcement import (
    CatalogSource,
    ColumnRef,
    Engine,
    EngineCache,
    EngineStore,
    TableTags,
    TagCache,
    row_filters,
)
from api.services.seen_columns import SeenColumns, table_key
from api.services.tag_lookup import Lookups, batch_masks, tags_for
from api.services.trino_files import OPA_FILE, trino_files
from metalake.http.problems import problem_response
from metalake.http.ratelimit import RateLimiter
from tenants.naming import CONTROL_DATABASE, names_for

log = logging.getLogger(__name__)

router = APIRouter(tags=["enforcement"])
PREFIX = "/v1/tenants/{tenant}/engines"
# The key is a secret in the path: logged as mle_<id>_*** (api/redaction.py).
OPA_PREFIX = secret_path("/v1/opa/{key}", "key", keep=r"mle_[0-9a-f]{16}_")

EngineId = Annotated[str, Path(pattern=r"^[0-9a-f]{16}$", description="The engine's id.")]
# Not validated by FastAPI: a malformed key is a 401 like a wrong one, never a 422 quoting it.
EngineKey = Annotated[str, Path(description="The engine's key (`mle_...`), as in its policy URIs.")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant or engine (another tenant's objects answer 404 too)."},
}
_OPA_ERRORS: dict[int | str, dict[str, Any]] = {
    400: {"description": "Not an OPA plugin request (the problem names the field)."},
    401: {"description": "No engine has this key."},
    429: {"description": "Too many unchecked keys from this address (rate-limited); see Retry-After."},
    503: {"description": "The decision could not be made (e.g. MongoDB unreachable): Trino fails the query."},
}


def _store(ctx: ApiContext) -> EngineStore:
    return EngineStore(ctx.mongo[CONTROL_DATABASE])


def _info(engine: Engine) -> EngineInfo:
    return EngineInfo(
        engine_id=engine.engine_id,
        name=engine.name,
        created_at=engine.created_at,
        catalogs=[CatalogMapping(**c.__dict__) for c in engine.catalogs],
        pii_users=sorted(engine.pii_users),
        pii_groups=sorted(engine.pii_groups),
        mask_style=engine.mask_style,
        consent_tag=engine.consent_tag,
        impersonators=sorted(engine.impersonators),
        operators=sorted(engine.operators),
    )


def _check_limits(ctx: ApiContext, body: EngineCreate) -> None:
    limits = ctx.settings.enforcement
    if len(body.catalogs) > limits.max_catalogs:
        raise Problem(422, "invalid-request", f"catalogs: at most {limits.max_catalogs}", field="catalogs")
    if len({c.catalog for c in body.catalogs}) != len(body.catalogs):
        raise Problem(422, "invalid-request", "catalogs: a Trino catalog is mapped twice", field="catalogs")
    for name in ("pii_users", "pii_groups", "impersonators", "operators"):
        values: list[str] = getattr(body, name)
        if len(values) > limits.max_principals:
            raise Problem(422, "invalid-request", f"{name}: at most {limits.max_principals}", field=name)
        if any(not v or len(v) > 256 or not v.isprintable() for v in values):
            raise Problem(422, "invalid-request", f"{name}: names of 1 to 256 printable characters", field=name)


@router.post(
    PREFIX,
    status_code=201,
    summary="Register a query engine",
    response_model=EngineCreated,
    responses={**_ERRORS, **quotas.RESPONSE},
)
async def create_engine(tc: TenantAdmin, ctx: ContextDep, body: EngineCreate) -> EngineCreated:
    """A customer's Trino that asks this API for PII decisions. The answer holds the engine's key once and the
    files to install in that Trino (`trino_files`: the OPA file, whose policy URIs carry the key, and the
    restrictive file-based rules beside it)."""
    _check_limits(ctx, body)
    store = _store(ctx)

    def create() -> tuple[Engine, str]:
        with quotas.claim(ctx, tc.tenant, quotas.ENGINES):
            return _create(ctx, tc, store, body)

    engine, key = await run_in_threadpool(create)
    info = _info(engine)
    files = trino_files(ctx.settings.api.issuer_url, key, engine)
    return EngineCreated(
        **info.model_dump(),
        tenant=tc.tenant,
        key=key,
        access_control_properties=files[OPA_FILE],
        trino_files=files,
    )


def _create(ctx: ApiContext, tc: TenantContext, store: EngineStore, body: EngineCreate) -> tuple[Engine, str]:
    engine, key = store.create(
        tc.tenant,
        name=body.name,
        catalogs=[CatalogSource(**c.model_dump()) for c in body.catalogs],
        pii_users=body.pii_users,
        pii_groups=body.pii_groups,
        mask_style=body.mask_style,
        consent_tag=body.consent_tag,
        impersonators=body.impersonators,
        operators=body.operators,
    )
    audit.record(ctx, tc.tenant, tc.principal, "engine.create", engine.engine_id, audit.DONE)
    return engine, key.get_secret_value()


@router.get(PREFIX, summary="List query engines", response_model=EnginesView, responses=_ERRORS)
async def list_engines(tc: TenantReader, ctx: ContextDep) -> EnginesView:
    """The tenant's engines with their mappings and grants. Keys are never returned."""
    engines = await run_in_threadpool(_store(ctx).list, tc.tenant)
    return EnginesView(items=[_info(e) for e in engines])


@router.delete(PREFIX + "/{engine_id}", status_code=204, summary="Remove a query engine", responses=_ERRORS)
async def delete_engine(tc: TenantAdmin, engine_id: EngineId, ctx: ContextDep) -> Response:
    """Remove the engine: its key is refused within `enforcement.cache_ttl_s`, and that Trino then fails its queries
    (OPA access control fails closed)."""

    def delete() -> bool:
        if not _store(ctx).delete(tc.tenant, engine_id):
            return False
        audit.record(ctx, tc.tenant, tc.principal, "engine.delete", engine_id, audit.DONE)
        return True

    if not await run_in_threadpool(delete):
        raise Problem(404, "not-found", "no such engine", field="engine_id")
    return Response(status_code=204)


# -- decisions -------------------------------------------------------------------------------------------------------


# How long a table's column list from a column-masks request serves its row filters: Trino asks for both in one
# analysis, so this only needs to outlive it; a schema change is seen at the next masks request.
_SEEN_COLUMNS_TTL_S = 300.0


@dataclass
class _Runtime:
    engines: EngineCache
    tags: TagCache
    # Per peer address, charged for keys not known valid before they are checked (as the token endpoint's).
    peers: RateLimiter
    columns: SeenColumns
    lookups: Lookups  # how tags are looked up (api.services.tag_lookup)


def _runtime(request: Request) -> _Runtime:
    # One per app (per process), built on first use: the caches' TTL is a setting of the app's context.
    runtime = getattr(request.app.state, "enforcement", None)
    if runtime is None:
        ctx: ApiContext = request.app.state.ctx
        limits = ctx.settings.enforcement
        runtime = _Runtime(
            EngineCache(limits.cache_ttl_s, limits.max_cached_tables),
            TagCache(limits.cache_ttl_s, limits.max_cached_tables),
            RateLimiter(limits.peer_rate_per_s, limits.peer_burst),
            SeenColumns(_SEEN_COLUMNS_TTL_S, limits.max_cached_tables),
            Lookups(),
        )
        request.app.state.enforcement = runtime
    assert isinstance(runtime, _Runtime)  # noqa: S101 - set just above
    return runtime


def _opa_problem(status: int, slug: str, detail: str, field: str | None = None) -> JSONResponse:
    return problem_response(Problem(status, slug, detail, field=field))


Decision = Callable[[Request, str], Awaitable[JSONResponse]]


def _guarded(decision: Decision) -> Decision:
    """A failure (MongoDB unreachable, a bug) answers 503 here, logged by decision and error type only: the app's
    own handler of unexpected errors would log the path and echo it as the problem's ``instance``, key included.
    Trino then fails the query (OPA access control fails closed)."""

    @functools.wraps(decision)
    async def guarded(request: Request, key: str) -> JSONResponse:
        try:
            return await decision(request, key)
        except Exception as exc:  # noqa: BLE001 - every failure answers the same, without the path
            log.error("opa.decision_failed", extra={"decision": decision.__name__, "error": type(exc).__name__})
            return _opa_problem(503, "decision-unavailable", "the decision could not be made; it has been logged")

    return guarded


async def _admit(request: Request, key: str) -> tuple[Engine, OpaQuery] | JSONResponse:
    """The engine of ``key`` and the parsed request, or the error answer. The key first: an unknown caller's body is
    never read."""
    ctx: ApiContext = request.app.state.ctx
    runtime = _runtime(request)
    if not runtime.engines.known(key):
        wait = runtime.peers.acquire("opa-peer:" + (request.client.host if request.client else "unknown"))
        if wait > 0:
            retry = max(1, math.ceil(wait))
            detail = f"too many unchecked keys from this address; retry in {retry} s"
            return problem_response(Problem(429, "rate-limited", detail, headers={"Retry-After": str(retry)}))
    engine = await run_in_threadpool(runtime.engines.get, key, _store(ctx).check_key)
    if engine is None:
        return _opa_problem(401, "invalid-engine-key", "no engine has this key")
    try:
        query = OpaQuery.model_validate_json(await request.body())
    except ValidationError as exc:
        first = exc.errors()[0]
        field = "/".join(str(p) for p in first.get("loc", ())) or "(root)"
        return _opa_problem(400, "invalid-request", f"{field}: {first.get('msg', 'invalid')}", field=field)
    action = query.input.action
    limit = ctx.settings.enforcement.max_batch_resources
    if opa_decisions.batch_size(action.operation, action.filterResources or []) > limit:
        field = "input/action/filterResources"
        return _opa_problem(400, "too-many-resources", f"{field}: at most {limit} resources per request", field)
    return engine, query


def _tags_of(request: Request, engine: Engine) -> Callable[[list[str]], dict[str, TableTags]]:
    """The tags of tables by URN (blocking): the cached ones, and the others in one lookup for the batch."""
    ctx: ApiContext = request.app.state.ctx
    db = ctx.mongo[names_for(engine.tenant, ctx.settings.lake_root).mongo_database]
    runtime = _runtime(request)

    def tags_of(urns: list[str]) -> dict[str, TableTags]:
        return runtime.tags.get_many(engine.tenant, urns, partial(tags_for, db, runtime.lookups, engine.tenant))

    return tags_of


@router.post(OPA_PREFIX + "/allow", summary="OPA: allow", responses=_OPA_ERRORS)
@_guarded
async def opa_allow(request: Request, key: EngineKey) -> JSONResponse:
    """Refuses impersonating a PII user, others' queries, system writes and a mapped catalog's pass-through
    functions and procedures (`api.services.opa_decisions`); allows the rest, which the customer's own access
    control, listed beside this one in `access-control.config-files`, decides."""
    admitted = await _admit(request, key)
    if isinstance(admitted, JSONResponse):
        return admitted
    engine, query = admitted
    action = query.input.action
    decision = opa_decisions.allow(engine, action.operation, query.input.context.identity, action.resource)
    return JSONResponse({"result": decision})


@router.post(OPA_PREFIX + "/batch", summary="OPA: batched filtering", responses=_OPA_ERRORS)
@_guarded
async def opa_batch(request: Request, key: EngineKey) -> JSONResponse:
    """The indexes of the resources the identity keeps: others' queries are filtered out (`allow`'s rules)."""
    admitted = await _admit(request, key)
    if isinstance(admitted, JSONResponse):
        return admitted
    engine, query = admitted
    action = query.input.action
    resources = action.filterResources or []
    kept = opa_decisions.batch(engine, action.operation, query.input.context.identity, resources)
    return JSONResponse({"result": kept})


@router.post(OPA_PREFIX + "/row-filters", summary="OPA: row filters", responses=_OPA_ERRORS)
@_guarded
async def opa_row_filters(request: Request, key: EngineKey) -> JSONResponse:
    """The consent filter of a table (docs/enforcement.md), for users without the PII grant."""
    admitted = await _admit(request, key)
    if isinstance(admitted, JSONResponse):
        return admitted
    engine, query = admitted
    resource = query.input.action.resource
    if resource is None or resource.table is None:
        return _opa_problem(400, "invalid-request", "input/action/resource/table: required", "input/action/resource")
    table, identity = resource.table, query.input.context.identity
    source = engine.source_for(table.catalogName)
    tags = None
    if source is not None and engine.consent_tag is not None and not engine.sees_pii(identity.user, identity.groups):
        urn = source.table_urn(table.schemaName, table.tableName)
        tags = (await run_in_threadpool(_tags_of(request, engine), [urn]))[urn]
    present = _runtime(request).columns.get(
        table_key(engine.engine_id, table.catalogName, table.schemaName, table.tableName)
    )
    filters = row_filters(engine, table.catalogName, tags, user=identity.user, groups=identity.groups, present=present)
    return JSONResponse({"result": [{"expression": f} for f in filters]})


def _column_ref(column: OpaColumn) -> ColumnRef:
    return ColumnRef(column.catalogName, column.schemaName, column.tableName, column.columnName, column.columnType)


async def _masks(request: Request, engine: Engine, query: OpaQuery, columns: list[ColumnRef]) -> list[tuple[int, str]]:
    ctx: ApiContext = request.app.state.ctx
    identity = query.input.context.identity
    compute = partial(
        batch_masks,
        engine,
        columns,
        _tags_of(request, engine),
        user=identity.user,
        groups=identity.groups,
        patterns=ctx.settings.access.pii_tags,
    )
    return await run_in_threadpool(compute)


@router.post(OPA_PREFIX + "/column-masks", summary="OPA: column masks (batch)", responses=_OPA_ERRORS)
@_guarded
async def opa_column_masks(request: Request, key: EngineKey) -> JSONResponse:
    """The masks of a table's columns for one user: a PII tag, direct or propagated, masks the column unless the user
    has the engine's PII grant."""
    admitted = await _admit(request, key)
    if isinstance(admitted, JSONResponse):
        return admitted
    engine, query = admitted
    columns: list[ColumnRef] = []
    for i, resource in enumerate(query.input.action.filterResources or []):
        if resource.column is None:
            field = f"input/action/filterResources/{i}/column"
            return _opa_problem(400, "invalid-request", f"{field}: required", field)
        columns.append(_column_ref(resource.column))
    # Trino asks about one table per request; a request's tables are looked up together (api.services.tag_lookup).
    limit = request.app.state.ctx.settings.enforcement.max_tables_per_request
    if len({(c.catalog, c.schema, c.table) for c in columns}) > limit:
        field = "input/action/filterResources"
        return _opa_problem(400, "too-many-resources", f"{field}: columns of at most {limit} tables", field)
    _runtime(request).columns.remember(engine.engine_id, columns)
    masks = await _masks(request, engine, query, columns)
    return JSONResponse({"result": [{"index": i, "viewExpression": {"expression": e}} for i, e in masks]})


@router.post(OPA_PREFIX + "/column-mask", summary="OPA: one column's mask", responses=_OPA_ERRORS)
@_guarded
async def opa_column_mask(request: Request, key: EngineKey) -> JSONResponse:
    """One column's mask (`opa.policy.column-masking-uri`, for a Trino configured without the batch URI)."""
    admitted = await _admit(request, key)
    if isinstance(admitted, JSONResponse):
        return admitted
    engine, query = admitted
    resource = query.input.action.resource
    if resource is None or resource.column is None:
        return _opa_problem(400, "invalid-request", "input/action/resource/column: required", "input/action/resource")
    masks = await _masks(request, engine, query, [_column_ref(resource.column)])
    return JSONResponse({"result": {"expression": masks[0][1]} if masks else None})


# The one redaction of secrets in paths (api/redaction.py); the name stays for the engines' tests.
RedactEngineKeys = RedactSecretPaths
