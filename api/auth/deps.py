"""The resource server's FastAPI dependencies: who is calling, and may they do this here.

* :func:`current_principal` validates the bearer token (RFC 9068, see :mod:`control.auth.validator`), refuses tokens of
  revoked clients and of suspended tenants, and applies the caller's rate limit. 401 with ``WWW-Authenticate``.
* :func:`require` ``(*scopes)``: 403 ``insufficient_scope`` unless the caller holds one of them
  (``platform:admin`` holds every scope).
* :func:`require_tenant` ``(*scopes)``: the ``{tenant}`` path parameter; a caller bound to another tenant gets the
  404 an unknown tenant gets (it learns nothing about other tenants), then the scope check.

Tests may replace the caller: ``app.dependency_overrides[current_principal] = lambda: Principal(...)``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Annotated

from fastapi import Depends, Path, Request
from fastapi.openapi.models import OAuthFlowClientCredentials, OAuthFlows
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer, OAuth2
from fastapi.security.utils import get_authorization_scheme_param
from pymongo.errors import PyMongoError

from api.auth.runtime import AuthRuntime
from api.problems import Problem
from api.redaction import redact_path
from api.security import TenantContext
from control.auth.gate import TenantRefused
from control.auth.jwks import KeySourceUnavailable
from control.auth.principal import Principal, Scope
from control.auth.problems import auth_unavailable, forbidden, tenant_refused, unauthorized
from control.auth.validator import InvalidToken

log = logging.getLogger(__name__)

SCOPE_DESCRIPTIONS: dict[str, str] = {
    Scope.PLATFORM_ADMIN.value: "Operate the platform: every tenant, every action.",
    Scope.TENANT_ADMIN.value: "Administer one tenant: clients, connectors, subscriptions, erasures.",
    Scope.TENANT_READ.value: "Read one tenant's assets, lineage, incidents, configuration.",
    Scope.EVENTS_WRITE.value: "Send events to the ingest API (the connector worker) and change tags in one tenant.",
    Scope.SQL_READ.value: "Query one tenant's tables through the SQL endpoint and create share links.",
}

bearer_scheme = HTTPBearer(
    auto_error=False,
    scheme_name="bearer",
    bearerFormat="JWT",
    description="An RFC 9068 access token from POST /oauth/token (client credentials).",
)
oauth2_scheme = OAuth2(
    flows=OAuthFlows(clientCredentials=OAuthFlowClientCredentials(tokenUrl="/oauth/token", scopes=SCOPE_DESCRIPTIONS)),
    scheme_name="oauth2",
    description="OAuth 2 client credentials (client_secret_basic or client_secret_post).",
    auto_error=False,
)


def auth_runtime(request: Request) -> AuthRuntime:
    auth = request.app.state.auth
    assert isinstance(auth, AuthRuntime)  # noqa: S101 - set by create_app
    return auth


def bearer_token(authorization: str | None) -> str | None:
    """The token of an ``Authorization: Bearer`` header, read as :data:`bearer_scheme` reads it; else None."""
    scheme, token = get_authorization_scheme_param(authorization)
    if not authorization or scheme.lower() != "bearer" or not token:
        return None
    return token


# Where admit() leaves the admitted token and its principal, so the route's dependency does not admit it twice.
_ADMITTED = "admitted"


def admit(request: Request, token: str | None) -> Principal:
    """The caller behind ``token``; raises the 401/403/429/503 problem+json of a token that is not acceptable.

    Runs once per request: in :class:`api.auth.first.AuthenticateFirst`, before the body is read, and again in
    :func:`current_principal` only for a request the layer did not admit (an app without it).
    """
    if not token:
        raise unauthorized("a bearer access token is required", error=None)
    auth = auth_runtime(request)
    try:
        verified = auth.gate.admit(token)
    except InvalidToken as exc:
        log.info("token refused", extra={"reason": str(exc), "path": redact_path(request.url.path)})
        raise unauthorized(str(exc)) from None
    except TenantRefused as exc:
        raise tenant_refused(str(exc)) from None
    except (PyMongoError, KeySourceUnavailable) as exc:
        log.warning("token check unavailable", extra={"error": type(exc).__name__})
        raise auth_unavailable() from None
    auth.limiter.check(verified.client_id)
    if verified.principal.tenant is not None:
        auth.tenant_limiter.check("tenant:" + verified.principal.tenant, who="this tenant's clients together")
    request.state.principal = verified.principal
    setattr(request.state, _ADMITTED, token)
    return verified.principal


def current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    _oauth: Annotated[str | None, Depends(oauth2_scheme)],
) -> Principal:
    """The caller behind the bearer token; 401 problem+json when there is none or it is not acceptable."""
    token = credentials.credentials if credentials is not None else None
    principal = getattr(request.state, "principal", None)
    if token and isinstance(principal, Principal) and getattr(request.state, _ADMITTED, None) == token:
        return principal
    return admit(request, token)


PrincipalDep = Annotated[Principal, Depends(current_principal)]


def require(*scopes: Scope) -> Callable[[Principal], Principal]:
    """A dependency: the caller, if they hold one of ``scopes``; else 403 insufficient_scope."""

    def check(principal: PrincipalDep) -> Principal:
        if scopes and not any(principal.has(s) for s in scopes):
            raise forbidden(scopes)
        return principal

    return check


def tenant_not_found() -> Problem:
    """The answer for a tenant the caller may not see, and for one that does not exist: they must not differ."""
    return Problem(404, "tenant-not-found", "no such tenant", field="tenant")


def require_tenant(*scopes: Scope) -> Callable[..., TenantContext]:
    """A dependency for ``/v1/tenants/{tenant}/...`` routes: the tenant, if the caller may act there with a scope."""

    def check(
        principal: PrincipalDep,
        tenant: Annotated[str, Path(description="The tenant id.", examples=["acme"])],
    ) -> TenantContext:
        if not principal.is_platform_admin and principal.tenant != tenant:
            raise tenant_not_found()
        if scopes and not any(principal.has(s) for s in scopes):
            raise forbidden(scopes)
        return TenantContext(tenant=tenant, principal=principal)

    return check
