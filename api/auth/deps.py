"""The resource server's FastAPI dependencies: who is calling, and may they do this here.

* :func:`current_principal` validates the bearer token (RFC 9068, see :mod:`api.auth.validator`), refuses tokens of
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
from pymongo.errors import PyMongoError

from api.auth.jwks import KeySourceUnavailable
from api.auth.runtime import AuthRuntime
from api.auth.validator import InvalidToken
from api.problems import Problem
from api.security import Principal, Scope, TenantContext

log = logging.getLogger(__name__)

SCOPE_DESCRIPTIONS: dict[str, str] = {
    Scope.PLATFORM_ADMIN.value: "Operate the platform: every tenant, every action.",
    Scope.TENANT_ADMIN.value: "Administer one tenant: clients, connectors, subscriptions, erasures.",
    Scope.TENANT_READ.value: "Read one tenant's assets, lineage, incidents, configuration.",
    Scope.EVENTS_WRITE.value: "Send events and change tags in one tenant.",
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

REALM = "metalake"


def auth_runtime(request: Request) -> AuthRuntime:
    auth = request.app.state.auth
    assert isinstance(auth, AuthRuntime)  # noqa: S101 - set by create_app
    return auth


def _unauthorized(detail: str, *, error: str | None = "invalid_token") -> Problem:
    # RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
    challenge = f'Bearer realm="{REALM}"'
    if error is not None:
        challenge += f', error="{error}", error_description="{detail}"'
    slug = "missing-token" if error is None else "invalid-token"
    return Problem(401, slug, detail, headers={"WWW-Authenticate": challenge})


def _forbidden(scopes: tuple[Scope, ...]) -> Problem:
    wanted = " ".join(s.value for s in scopes)
    return Problem(
        403,
        "insufficient-scope",
        f"this needs one of the scopes: {wanted}",
        headers={"WWW-Authenticate": f'Bearer realm="{REALM}", error="insufficient_scope", scope="{wanted}"'},
        extra={"required_scopes": [s.value for s in scopes]},
    )


def current_principal(
    request: Request,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(bearer_scheme)],
    _oauth: Annotated[str | None, Depends(oauth2_scheme)],
) -> Principal:
    """The caller behind the bearer token; 401 problem+json when there is none or it is not acceptable."""
    if credentials is None or not credentials.credentials:
        raise _unauthorized("a bearer access token is required", error=None)
    auth = auth_runtime(request)
    try:
        verified = auth.validator.validate(credentials.credentials)
        if not auth.external:
            client = auth.client_cache.get(verified.client_id)
            if client is None or not client.active:
                raise InvalidToken("the client was revoked")
        principal = verified.principal
        if principal.tenant is not None and not auth.tenant_usable(principal.tenant):
            raise Problem(403, "tenant-suspended", "the tenant of this token is suspended", field="tenant")
    except InvalidToken as exc:
        log.info("token refused", extra={"reason": str(exc), "path": request.url.path})
        raise _unauthorized(str(exc)) from None
    except (PyMongoError, KeySourceUnavailable) as exc:
        log.warning("token check unavailable", extra={"error": type(exc).__name__})
        raise Problem(
            503,
            "auth-unavailable",
            "the token issuer's keys are unreachable; retry shortly",
            headers={"Retry-After": "5"},
        ) from None
    auth.limiter.check(verified.client_id)
    request.state.principal = principal
    return principal


PrincipalDep = Annotated[Principal, Depends(current_principal)]


def require(*scopes: Scope) -> Callable[[Principal], Principal]:
    """A dependency: the caller, if they hold one of ``scopes``; else 403 insufficient_scope."""

    def check(principal: PrincipalDep) -> Principal:
        if scopes and not any(principal.has(s) for s in scopes):
            raise _forbidden(scopes)
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
            raise _forbidden(scopes)
        return TenantContext(tenant=tenant, principal=principal)

    return check
