"""What every request of the admin API shares, kept on ``app.state``: settings, the MongoDB client, and (built on
first use) the Trino calls' pool, the heavy work's and the token checks' pools and the share links' rate limiters."""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Annotated, Any

from fastapi import Depends, Request
from pymongo import MongoClient

from api.services.auditbatch import AuditBatcher
from api.services.trinopool import TrinoPool
from api.settings import AdminApiSettings
from api.workpool import WorkPool, WorkPools
from control.auth.protective import ProtectiveTags
from metalake.http.ratelimit import RateLimiter
from tenants.naming import CONTROL_DATABASE


@dataclass(frozen=True)
class ApiContext:
    settings: AdminApiSettings
    mongo: MongoClient[dict[str, Any]]
    # The app's audit rows, committed in batches (api/services/auditbatch.py); None (the CLI): each row at once.
    audit_batcher: AuditBatcher | None = None

    # Built on first use (in the event loop's thread): the CLI's contexts never run a query.
    @cached_property
    def trino(self) -> TrinoPool:
        """The Trino calls' own thread pool with its per-tenant cap (api/services/trinopool.py)."""
        sql = self.settings.sql
        return TrinoPool(sql.workers, sql.max_concurrent_per_tenant)

    @cached_property
    def pools(self) -> WorkPools:
        """The heavy work's pools, one per kind, each with its per-tenant cap (api/workpool.py)."""
        return WorkPools(self.settings.api.work_workers, self.settings.api.work_per_tenant)

    @cached_property
    def token_checks(self) -> WorkPool:
        """The token checks' own threads: no route's work can make a request wait for its token check."""
        api = self.settings.api
        return WorkPool("token-check", api.token_check_workers, None, queue=api.token_check_queue)

    @cached_property
    def secret_checks(self) -> WorkPool:
        """The token endpoint's secret checks (scrypt): their own threads, a bounded wait, then 503."""
        api = self.settings.api
        return WorkPool("token-secret-check", api.token_secret_workers, None, queue=api.token_secret_queue)

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
