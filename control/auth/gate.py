"""Whether an access token is admitted, the one rule the admin API and the connector worker's ingest API apply.

A token is admitted when it validates (RFC 9068, :mod:`control.auth.validator`), its client is not revoked (tokens of
the built-in authorization server only: an external issuer's clients are not in our store) and its tenant is neither
suspended nor being deleted. Scopes are the caller's to check against what the route needs.
"""

from __future__ import annotations

from dataclasses import dataclass

from pymongo.database import Database

from control.auth.clients import ClientCache, ClientStore
from control.auth.jwks import JwksCache, verification_source
from control.auth.settings import AuthSettings
from control.auth.validator import RFC9068, AccessTokenValidator, InvalidToken, VerifiedToken
from metalake.mongo import Doc
from tenants.registry import TenantDirectory, TenantRegistry, TenantState

# A tenant in one of these states gets no tokens, and the tokens it has are refused.
REFUSED_STATES = frozenset({TenantState.SUSPENDED, TenantState.DELETING})


class TenantRefused(Exception):
    """The token's tenant is suspended or being deleted (403). The message is safe to send back."""


def tenant_usable(tenants: TenantDirectory, tenant: str) -> bool:
    """Unregistered tenants are pooled and usable (tests, the demo); registered ones unless suspended or deleting."""
    record = tenants.record(tenant)
    return record is None or record.state not in REFUSED_STATES


@dataclass(frozen=True)
class TokenGate:
    """Admits access tokens. ``clients`` is ``None`` when an external issuer is the only trusted one."""

    validator: AccessTokenValidator
    clients: ClientCache | None
    tenants: TenantDirectory

    def admit(self, token: str) -> VerifiedToken:
        """The verified token; :class:`InvalidToken` (401) or :class:`TenantRefused` (403) if it is not admitted.
        ``pymongo`` errors and :class:`control.auth.jwks.KeySourceUnavailable` mean it cannot be checked now (503)."""
        verified = self.validator.validate(token)
        if self.clients is not None:
            client = self.clients.get(verified.client_id)
            if client is None or not client.active:
                raise InvalidToken("the client was revoked")
        tenant = verified.principal.tenant
        if tenant is not None and not tenant_usable(self.tenants, tenant):
            raise TenantRefused("the tenant of this token is suspended")
        return verified


def build_gate(
    settings: AuthSettings,
    control: Database[Doc],
    *,
    keys: JwksCache | None = None,
    clients: ClientCache | None = None,
    tenants: TenantDirectory | None = None,
) -> TokenGate:
    """The gate for ``settings.api`` (issuer, audience, leeway, tenant claim, external issuer) over the control-plane
    database ``control``. The admin API passes the caches it shares with its token endpoint and client routes."""
    api = settings.api
    if keys is None:
        keys = JwksCache(
            verification_source(api, control), min_refresh_s=api.jwks_min_refresh_s, max_age_s=api.jwks_max_age_s
        )
    validator = AccessTokenValidator(
        keys,
        issuer=api.external_issuer or api.issuer_url,
        audience=api.audience,
        leeway_s=api.leeway_s,
        tenant_claim=api.tenant_claim,
        # Only the external issuer may have a profile (settings refuse one for ours): RFC 9068's otherwise.
        profile=api.issuer_profiles.get(api.external_issuer, RFC9068) if api.external_issuer else RFC9068,
    )
    if api.external_issuer:
        clients = None
    elif clients is None:
        clients = ClientCache(ClientStore(control), api.client_cache_ttl_s)
    if tenants is None:
        tenants = TenantDirectory(TenantRegistry(control), settings.lake_root, ttl_s=api.client_cache_ttl_s)
    return TokenGate(validator, clients, tenants)
