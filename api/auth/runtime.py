"""Everything authentication needs for one app, built once by ``create_app`` and kept on ``app.state.auth``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pymongo import MongoClient

from api.auth.clients import ClientCache, ClientStore
from api.auth.jwks import JwksCache, JwksSource, discover_jwks_url, http_jwks
from api.auth.keys import SigningKeyStore
from api.auth.server import TokenServer
from api.auth.validator import AccessTokenValidator
from api.ratelimit import RateLimiter
from metalake.settings import Settings
from tenants.naming import CONTROL_DATABASE
from tenants.registry import TenantDirectory, TenantRegistry, TenantState

# A tenant in one of these states gets no tokens, and the tokens it has are refused.
REFUSED_STATES = frozenset({TenantState.SUSPENDED, TenantState.DELETING})


def _external_source(issuer: str) -> JwksSource:
    lock = threading.Lock()
    found: list[str] = []

    def fetch() -> Mapping[str, Any]:
        # Discovered on first use, not at startup: the API comes up even while the issuer is briefly unreachable.
        with lock:
            if not found:
                found.append(discover_jwks_url(issuer))
            url = found[0]
        return http_jwks(url)()

    return fetch


@dataclass(frozen=True)
class AuthRuntime:
    settings: Settings
    keys: SigningKeyStore
    clients: ClientStore
    client_cache: ClientCache
    tenants: TenantDirectory
    validator: AccessTokenValidator
    limiter: RateLimiter
    server: TokenServer

    @property
    def external(self) -> bool:
        return self.settings.api.external_issuer is not None

    def tenant_usable(self, tenant: str) -> bool:
        return tenant_usable(self.tenants, tenant)


def tenant_usable(tenants: TenantDirectory, tenant: str) -> bool:
    """Unregistered tenants are pooled and usable (tests, the demo); registered ones unless suspended or deleting."""
    record = tenants.record(tenant)
    return record is None or record.state not in REFUSED_STATES


def build_auth(settings: Settings, mongo: MongoClient[dict[str, Any]]) -> AuthRuntime:
    api = settings.api
    control = mongo[CONTROL_DATABASE]
    keys = SigningKeyStore(control, api)
    clients = ClientStore(control)
    issuer = api.external_issuer or api.issuer_url
    source: JwksSource = _external_source(issuer) if api.external_issuer else keys.jwks
    jwks = JwksCache(source, min_refresh_s=api.jwks_min_refresh_s, max_age_s=api.jwks_max_age_s)
    validator = AccessTokenValidator(
        jwks, issuer=issuer, audience=api.audience, leeway_s=api.leeway_s, tenant_claim=api.tenant_claim
    )
    tenants = TenantDirectory(TenantRegistry(control), settings.lake_root, ttl_s=api.client_cache_ttl_s)
    return AuthRuntime(
        settings=settings,
        keys=keys,
        clients=clients,
        client_cache=ClientCache(clients, api.client_cache_ttl_s),
        tenants=tenants,
        validator=validator,
        limiter=RateLimiter(api.rate_limit_per_s, api.rate_limit_burst),
        server=TokenServer(
            clients,
            keys,
            api,
            lambda tenant: tenant_usable(tenants, tenant),
            # An external issuer's tokens never come from our keys; ours are trusted as soon as we sign with them.
            on_sign=(lambda key: None) if api.external_issuer else jwks.remember,
        ),
    )
