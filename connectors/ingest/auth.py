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

Events that may unmask PII (:mod:`control.auth.pii`) also need the PII grant: a token's ``pii:read`` or
``tenant:admin``, or a write key created with ``pii`` (:class:`IngestCaller`; the route refuses them otherwise).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import SecretStr
from pymongo.errors import PyMongoError

from connectors.runtime.context import RuntimeDep
from control.auth.gate import TenantRefused, TokenGate, tenant_usable
from control.auth.jwks import KeySourceUnavailable
from control.auth.pii import may_weaken
from control.auth.principal import Principal, Scope
from control.auth.problems import auth_unavailable, forbidden, tenant_refused, unauthorized
from control.auth.validator import InvalidToken
from control.connectors.write_keys import parse_write_key
from metalake.http.problems import Problem

WRITE_KEY_HEADER = "x-metalake-write-key"

Kind = Literal["write-key", "token"]


@dataclass(frozen=True)
class IngestCaller:
    """Who sends the events: the tenant they are for, the actor the audit names (a token's client id, or
    ``write-key:<key id>``), and whether it holds the PII grant."""

    tenant: str
    actor: str
    pii: bool = False


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


def token_principal(gate: TokenGate, token: str) -> Principal:
    """The principal of an access token that may send events (bound to a tenant), or the problem that refuses it."""
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
    return principal


async def ingest_caller(request: Request, runtime: RuntimeDep) -> IngestCaller:
    """Who the request's credential sends events as; a problem if it is missing or not acceptable."""
    credential = presented(request)
    if credential is None:
        raise _unauthorized(
            "a write key or an access token is required: Authorization: Bearer <key or token>, or X-Metalake-Write-Key"
        )
    kind, value = credential
    if kind == "token":
        principal = await run_in_threadpool(token_principal, runtime.gate, value.get_secret_value())
        return IngestCaller(str(principal.tenant), principal.subject, may_weaken(principal))
    grant = await run_in_threadpool(runtime.store.write_keys.check, value)
    if grant is None:
        raise _unauthorized("the write key is not valid")
    await run_in_threadpool(refuse_unusable_tenant, runtime.gate, grant.tenant)
    return IngestCaller(grant.tenant, f"write-key:{grant.key_id}", grant.pii)


def refuse_unusable_tenant(gate: TokenGate, tenant: str) -> None:
    """A write key's tenant must be usable, as a token's is (the gate's cached tenant lookup: a suspension is seen
    within its TTL, ``api.client_cache_ttl_s``): else 403 ``tenant-suspended``, 503 if it cannot be read now."""
    try:
        usable = tenant_usable(gate.tenants, tenant)
    except PyMongoError:
        raise auth_unavailable() from None
    if not usable:
        raise tenant_refused("the tenant of this write key is suspended or being deleted")


IngestCallerDep = Annotated[IngestCaller, Depends(ingest_caller)]
