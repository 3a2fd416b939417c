"""What a tag would reach along lineage, without changing anything (the propagation dry-run).

The walk is the propagation processor's own (``metalake.propagation.dry_run``: same graph, directions, blocked
tags, deleted assets and guardrails), over the tenant's lineage and tags as MongoDB holds them now. Needs
``tenant:read`` (or ``tenant:admin``); it reads only, so nothing is audited.
"""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from api.context import ContextDep
from api.deps import TenantReader
from metalake.propagation import dry_run_tenant
from metalake.propagation.config import limits_from
from metalake.propagation.dry_run import TAG_PATTERN, URN_PATTERN
from tenants.naming import names_for

MAX_DEPTH = 50
MAX_LISTED = 10_000


_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant (another tenant's answers 404 too)."},
    422: {"description": "Invalid body (problem+json naming the field, e.g. `urn`, `tag` or `max_depth`)."},
}

router = APIRouter(prefix="/v1/tenants/{tenant}/propagation", tags=["propagation"])


class DryRunRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"urn": "urn:metalake:postgres:prod/shop/public/users/email", "tag": "PII"}},
    )

    urn: str = Field(pattern=URN_PATTERN, max_length=2048, description="The asset the tag would be put on.")
    tag: str = Field(pattern=TAG_PATTERN, description="Tag name, e.g. `PII` or `GDPR.personal`.")
    max_depth: int | None = Field(
        default=None, ge=1, le=MAX_DEPTH, description="Hops from the asset (default: the processor's configured limit)."
    )
    limit: int = Field(
        default=1000, ge=0, le=MAX_LISTED, description="How many reached assets to list (nearest first)."
    )


class ReachedView(BaseModel):
    urn: str
    path: list[str] = Field(description="From the asset (first) to this one (last).")
    depth: int
    already_tagged: bool = Field(description="The asset holds the tag already (directly, or propagated).")


class DryRunView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "urn": "urn:metalake:postgres:prod/shop/public/users/email",
                "tag": "PII",
                "count": 1,
                "max_depth": 1,
                "truncated": False,
                "reason": None,
                "listed": 1,
                "reached": [
                    {
                        "urn": "urn:metalake:postgres:prod/shop/mart/customers/email",
                        "path": [
                            "urn:metalake:postgres:prod/shop/public/users/email",
                            "urn:metalake:postgres:prod/shop/mart/customers/email",
                        ],
                        "depth": 1,
                        "already_tagged": False,
                    }
                ],
            }
        }
    )

    urn: str
    tag: str
    count: int = Field(description="How many assets the tag would reach (all of them, listed or not).")
    max_depth: int = Field(description="The deepest of them.")
    truncated: bool = Field(description="A guardrail (depth, fan-out, reached assets, time) cut the walk short.")
    reason: Literal["max_depth", "max_fanout", "max_reached", "time_budget"] | None
    listed: int = Field(description="How many are in `reached` (at most the request's `limit`).")
    reached: list[ReachedView]


@router.post("/dry-run", summary="What a tag would reach along lineage", response_model=DryRunView, responses=_ERRORS)
def dry_run(tc: TenantReader, ctx: ContextDep, body: DryRunRequest) -> DryRunView:
    """The assets a tag put on ``urn`` would reach, nearest first, each with its path and depth, computed as the
    propagation processor would (edge directions, blocked tags, deleted assets, guardrails). Changes nothing. An
    asset without lineage reaches nothing: the answer is then an empty list, not 404."""
    names = names_for(tc.tenant, ctx.settings.lake_root)
    limits = limits_from(ctx.settings, body.max_depth)
    result = dry_run_tenant(ctx.mongo[names.mongo_database], tc.tenant, body.urn, body.tag, limits)
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
