"""Who may send events: a tenant's write key, or an OAuth 2 access token with ``events:write``. The credential
decides the tenant.

* A write key (``mlk_<key id>_<secret>``, as ``Authorization: Bearer`` or ``X-Metalake-Write-Key``): stored as a
  SHA-256 hash and compared in constant time (``ControlStore``). Missing, unknown or revoked: 401
  ``invalid-write-key``; its tenant suspended or being deleted: 403 ``tenant-suspended``, as for a token.
* An access token (``Authorization: Bearer <JWT>``, told from a write key by its shape): admitted by the admin API's
  own gate (:mod:`control.auth.gate`: signature, issuer, audience, expiry, client not revoked, tenant not
  suspended), refused with the admin API's answers (401 ``invalid-token``, 403 ``tenant-suspended``, 503
  ``auth-unavailable``). It must hold ``events:write`` (``platform:admin`` holds every scope; else 403
  ``insufficient-scope``) and be bound to a tenant (a platform token has none: 403 ``tenant-required``). Its tenant
  claim is the tenant the events must name.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import SecretStr
from pymongo.errors import PyMongoError

from connectors.runtime.context import RuntimeDep
from control.auth.gate import TenantRefused, TokenGate, tenant_usable
from control.auth.jwks import KeySourceUnavailable
from control.auth.principal import Scope
from control.auth.problems import auth_unavailable, forbidden, tenant_refused, unauthorized
from control.auth.validator import InvalidToken
from control.connectors.store import parse_write_key
from metalake.http.problems import Problem

WRITE_KEY_HEADER = "x-metalake-write-key"

Kind = Literal["write-key", "token"]


def _unauthorized(detail: str) -> Problem:
    return Problem(401, "invalid-write-key", detail, field="authorization", headers={"WWW-Authenticate": "Bearer"})


def _kind(value: str) -> Kind:
    # A write key's parts are URL-safe base64 (no dots); a JWS compact token is three dot-separated parts.
    if parse_write_key(value) is None and value.count(".") == 2:
        return "token"
    return "write-key"


def presented(request: Request) -> tuple[Kind, SecretStr] | None:
    """The request's credential and what it is; ``None`` if it has none (or an Authorization that is not Bearer)."""
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, value = header.partition(" ")
        value = value.strip()
        if scheme.lower() == "bearer" and value:
            return _kind(value), SecretStr(value)
        return None
    key = request.headers.get(WRITE_KEY_HEADER)
    return ("write-key", SecretStr(key.strip())) if key and key.strip() else None


def token_tenant(gate: TokenGate, token: str) -> str:
    """The tenant an access token may send events for, or the problem that refuses it."""
    try:
        principal = gate.admit(token).principal
    except InvalidToken as exc:
        raise unauthorized(str(exc)) from None
    except TenantRefused as exc:
        raise tenant_refused(str(exc)) from None
    except (PyMongoError, KeySourceUnavailable):
        raise auth_unavailable() from None
    if not principal.has(Scope.EVENTS_WRITE):
        raise forbidden((Scope.EVENTS_WRITE,))
    if principal.tenant is None:
        raise Problem(
            403,
            "tenant-required",
            "the token is bound to no tenant: send events with a token (or write key) of the tenant",
            field="authorization",
        )
    return principal.tenant


async def ingest_tenant(request: Request, runtime: RuntimeDep) -> str:
    """The tenant the request's credential sends events for; a problem if it is missing or not acceptable."""
    credential = presented(request)
    if credential is None:
        raise _unauthorized(
            "a write key or an access token is required: Authorization: Bearer <key or token>, or X-Metalake-Write-Key"
        )
    kind, value = credential
    if kind == "token":
        return await run_in_threadpool(token_tenant, runtime.gate, value.get_secret_value())
    tenant = await run_in_threadpool(runtime.store.tenant_for_write_key, value)
    if tenant is None:
        raise _unauthorized("the write key is not valid")
    await run_in_threadpool(refuse_unusable_tenant, runtime.gate, tenant)
    return tenant


def refuse_unusable_tenant(gate: TokenGate, tenant: str) -> None:
    """A write key's tenant must be usable, as a token's is (the gate's cached tenant lookup: a suspension is seen
    within its TTL, ``api.client_cache_ttl_s``): else 403 ``tenant-suspended``, 503 if it cannot be read now."""
    try:
        usable = tenant_usable(gate.tenants, tenant)
    except PyMongoError:
        raise auth_unavailable() from None
    if not usable:
        raise tenant_refused("the tenant of this write key is suspended or being deleted")


IngestTenant = Annotated[str, Depends(ingest_tenant)]
