"""Propagation dry-run bodies: the tag to try on an asset, and the assets it would reach with their paths."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.urns import Canonical
from catalog.propagation.dry_run import TAG_PATTERN, URN_PATTERN

MAX_DEPTH = 50
MAX_LISTED = 10_000


class DryRunRequest(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"urn": "urn:metalake:postgres:prod/shop/public/users/email", "tag": "PII"}},
    )

    urn: Annotated[
        str, Field(pattern=URN_PATTERN, max_length=2048, description="The asset the tag would be put on."), Canonical
    ]
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
