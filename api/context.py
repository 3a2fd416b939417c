"""What every request of the admin API shares, kept on ``app.state``: settings, the MongoDB client, and (built on
first use) the Trino calls' pool and the share links' rate limiters."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from fastapi import Depends, Request
from pymongo import MongoClient

from api.ratelimit import RateLimiter
from api.services.trinopool import TrinoPool
from control.auth.protective import ProtectiveTags
from metalake.settings import Settings
from tenants.naming import CONTROL_DATABASE


@dataclass(frozen=True)
class ApiContext:
    settings: Settings
    mongo: MongoClient[dict[str, Any]]

    # Built on first use (in the event loop's thread): the CLI's contexts never run a query.
    @cached_property
    def trino(self) -> TrinoPool:
        """The Trino calls' own thread pool with its per-tenant cap (api/services/trinopool.py)."""
        sql = self.settings.sql
        return TrinoPool(sql.workers, sql.max_concurrent_per_tenant)

    @cached_property
    def share_limits(self) -> tuple[RateLimiter, RateLimiter]:
        """Share link reads: (per link, per peer address)."""
        sql = self.settings.sql
        return (
            RateLimiter(sql.share_rate_per_s, sql.share_burst),
            RateLimiter(sql.share_peer_rate_per_s, sql.share_peer_burst),
        )

    @cached_property
    def protective_tags(self) -> ProtectiveTags:
        """The tags whose removal needs the PII grant, per tenant (PII tags and engines' consent tags)."""
        access = self.settings.access
        return ProtectiveTags(
            self.mongo[CONTROL_DATABASE],
            access.pii_tags,
            access.protective_tags,
            ttl_s=self.settings.enforcement.cache_ttl_s,
        )


def api_context(request: Request) -> ApiContext:
    ctx = request.app.state.ctx
    assert isinstance(ctx, ApiContext)  # noqa: S101 - set by create_app
    return ctx


ContextDep = Annotated[ApiContext, Depends(api_context)]
