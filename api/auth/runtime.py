"""Everything authentication needs for one app, built once by ``create_app`` and kept on ``app.state.auth``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pymongo import MongoClient

from api.auth.keys import SigningKeyStore
from api.auth.server import TokenServer
from api.settings import AdminApiSettings
from control.auth.clients import ClientCache, ClientStore
from control.auth.gate import TokenGate, build_gate, tenant_usable
from control.auth.jwks import JwksCache, verification_source
from metalake.http.ratelimit import RateLimiter
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantDirectory, TenantRegistry


@dataclass(frozen=True)
class AuthRuntime:
    settings: AdminApiSettings
    keys: SigningKeyStore
    clients: ClientStore
    client_cache: ClientCache
    tenants: TenantDirectory
    gate: TokenGate
    limiter: RateLimiter
    # Every request of one tenant's clients together: creating clients does not multiply a tenant's rate.
    tenant_limiter: RateLimiter
    # The token endpoint's per-address budget, apart from the per-client one (see api/routes/oauth.py).
    token_peer_limiter: RateLimiter
    # The token endpoint's failed attempts per (claimed client id, peer address): a wrong secret sent from one address
    # never throttles the client from another.
    token_failure_limiter: RateLimiter
    server: TokenServer

    @property
    def external(self) -> bool:
        return self.settings.api.external_issuer is not None

    def tenant_usable(self, tenant: str) -> bool:
        return tenant_usable(self.tenants, tenant)


def build_auth(settings: AdminApiSettings, mongo: MongoClient[dict[str, Any]]) -> AuthRuntime:
    api = settings.api
    control = mongo[CONTROL_DATABASE]
    keys = SigningKeyStore(control, api)
    clients = ClientStore(control)
    client_cache = ClientCache(clients, api.client_cache_ttl_s)
    jwks = JwksCache(
        verification_source(api, control), min_refresh_s=api.jwks_min_refresh_s, max_age_s=api.jwks_max_age_s
    )
    tenants = TenantDirectory(TenantRegistry(control), settings.lake_root, ttl_s=api.client_cache_ttl_s)
    return AuthRuntime(
        settings=settings,
        keys=keys,
        clients=clients,
        client_cache=client_cache,
        tenants=tenants,
        # The client routes invalidate client_cache on a revocation, so the gate must use that very cache.
        gate=build_gate(settings, control, keys=jwks, clients=client_cache, tenants=tenants),
        limiter=RateLimiter(api.rate_limit_per_s, api.rate_limit_burst),
        tenant_limiter=RateLimiter(api.tenant_rate_limit_per_s, api.tenant_rate_limit_burst),
        token_peer_limiter=RateLimiter(api.token_peer_rate_per_s, api.token_peer_burst),
        token_failure_limiter=RateLimiter(api.token_failure_rate_per_s, api.token_failure_burst),
        server=TokenServer(
            clients,
            keys,
            api,
            lambda tenant: tenant_usable(tenants, tenant),
            # An external issuer's tokens never come from our keys; ours are trusted as soon as we sign with them.
            on_sign=(lambda key: None) if api.external_issuer else jwks.remember,
            trino_user_claim=settings.trino.jwt.user_claim if settings.trino.jwt.enabled else None,
        ),
    )
