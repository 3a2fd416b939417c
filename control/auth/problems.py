"""The problem+json answers of a refused bearer token, the same from every service that accepts access tokens.

401 carries the RFC 6750 challenge (``WWW-Authenticate: Bearer``, with ``error="invalid_token"`` when a token was
sent); 403 ``insufficient_scope`` names the scopes that would do.
"""

from __future__ import annotations

from collections.abc import Sequence

from control.auth.principal import Scope
from metalake.http.problems import Problem

REALM = "metalake"


def unauthorized(detail: str, *, error: str | None = "invalid_token") -> Problem:
    # RFC 6750 §3.1: a request without credentials gets the challenge without an error code.
    challenge = f'Bearer realm="{REALM}"'
    if error is not None:
        challenge += f', error="{error}", error_description="{detail}"'
    slug = "missing-token" if error is None else "invalid-token"
    return Problem(401, slug, detail, headers={"WWW-Authenticate": challenge})


def forbidden(scopes: Sequence[Scope]) -> Problem:
    wanted = " ".join(s.value for s in scopes)
    return Problem(
        403,
        "insufficient-scope",
        f"this needs one of the scopes: {wanted}",
        headers={"WWW-Authenticate": f'Bearer realm="{REALM}", error="insufficient_scope", scope="{wanted}"'},
        extra={"required_scopes": [s.value for s in scopes]},
    )


def tenant_refused(detail: str) -> Problem:
    return Problem(403, "tenant-suspended", detail, field="tenant")


def auth_unavailable() -> Problem:
    return Problem(
        503, "auth-unavailable", "the token issuer's keys are unreachable; retry shortly", headers={"Retry-After": "5"}
    )
