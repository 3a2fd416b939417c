"""Who is calling: the principal an access token stands for, and the scopes it may use.

The contract of every OAuth-protected route: the admin API's (``api.auth.deps``) and the connector worker's ingest
API (``connectors.ingest.auth``). Tokens are validated by :mod:`control.auth.validator` and admitted by
:mod:`control.auth.gate`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Scope(StrEnum):
    PLATFORM_ADMIN = "platform:admin"
    TENANT_ADMIN = "tenant:admin"
    TENANT_READ = "tenant:read"
    EVENTS_WRITE = "events:write"
    SQL_READ = "sql:read"
    # Read PII-tagged columns in clear through the SQL endpoint; granted per client, never implied by a role.
    PII_READ = "pii:read"


@dataclass(frozen=True)
class Principal:
    """The caller: an OAuth client (``sub``), bound to one tenant unless it is a platform administrator."""

    subject: str
    tenant: str | None
    scopes: frozenset[str]
    token_id: str | None = None

    @property
    def is_platform_admin(self) -> bool:
        return Scope.PLATFORM_ADMIN in self.scopes

    def has(self, scope: Scope) -> bool:
        # A platform administrator may do anything a tenant administrator may, in any tenant.
        return self.is_platform_admin or scope in self.scopes
