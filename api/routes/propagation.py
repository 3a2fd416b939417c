"""What a tag would reach along lineage, without changing anything (the propagation dry-run).

The walk is the propagation processor's own (``catalog.propagation.dry_run``: same graph, directions, blocked
tags, deleted assets and guardrails), over the tenant's lineage and tags as MongoDB holds them now: only the part
within the walk's reach is read, up to ``propagation.dry_run_max_edges`` edges (beyond: 422). Needs
``tenant:read`` (or ``tenant:admin``); it reads only, so nothing is audited.
"""

from __future__ import annotations

from functools import partial
from typing import Any

from fastapi import APIRouter

from api.context import ContextDep
from api.deps import TenantReader
from api.problems import Problem
from api.schemas.propagation import DryRunRequest, DryRunView, ReachedView
from api.workpool import DRY_RUN
from catalog.propagation import dry_run_tenant
from catalog.propagation.config import limits_from
from catalog.propagation.store import TooLarge
from tenants.naming import names_for

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant (another tenant's answers 404 too)."},
    422: {
        "description": "Invalid body (problem+json naming the field, e.g. `urn`, `tag` or `max_depth`), or "
        "`dry-run-too-large`: more lineage within reach than `propagation.dry_run_max_edges` (field `max_depth`)."
    },
}

router = APIRouter(prefix="/v1/tenants/{tenant}/propagation", tags=["propagation"])


@router.post("/dry-run", summary="What a tag would reach along lineage", response_model=DryRunView, responses=_ERRORS)
async def dry_run(tc: TenantReader, ctx: ContextDep, body: DryRunRequest) -> DryRunView:
    """The assets a tag put on ``urn`` would reach, nearest first, each with its path and depth, computed as the
    propagation processor would (edge directions, blocked tags, deleted assets, guardrails). Changes nothing. An
    asset without lineage reaches nothing: the answer is then an empty list, not 404."""
    names = names_for(tc.tenant, ctx.settings.lake_root)
    limits = limits_from(ctx.settings.propagation, body.max_depth)
    try:
        # On the dry runs' own pool, within the tenant's share of it (429/503 at once beyond).
        result = await ctx.pools.run(
            DRY_RUN,
            tc.tenant,
            partial(dry_run_tenant, max_edges=ctx.settings.propagation.dry_run_max_edges),
            ctx.mongo[names.mongo_database],
            tc.tenant,
            body.urn,
            body.tag,
            limits,
        )
    except TooLarge as exc:
        raise Problem(422, "dry-run-too-large", str(exc), field="max_depth") from None
    listed = result.reached[: body.limit]
    return DryRunView(
        urn=result.urn,
        tag=result.tag,
        count=len(result.reached),
        max_depth=result.max_depth,
        truncated=result.truncated,
        reason=result.reason,
        listed=len(listed),
        reached=[
            ReachedView(urn=r.urn, path=list(r.path), depth=r.depth, already_tagged=r.already_tagged) for r in listed
        ],
    )
