"""Write-key authentication for the ingest API: the key (``Authorization: Bearer`` or ``X-Metalake-Write-Key``)
decides the tenant. Keys are stored as SHA-256 hashes and compared in constant time (``ControlStore``)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends, Request
from fastapi.concurrency import run_in_threadpool
from pydantic import SecretStr

from connectors.runtime.context import RuntimeDep
from metalake.http.problems import Problem

WRITE_KEY_HEADER = "x-metalake-write-key"


def _unauthorized(detail: str) -> Problem:
    return Problem(401, "invalid-write-key", detail, field="authorization", headers={"WWW-Authenticate": "Bearer"})


def presented_key(request: Request) -> SecretStr | None:
    header = request.headers.get("authorization")
    if header is not None:
        scheme, _, token = header.partition(" ")
        if scheme.lower() == "bearer" and token.strip():
            return SecretStr(token.strip())
        return None
    key = request.headers.get(WRITE_KEY_HEADER)
    return SecretStr(key.strip()) if key and key.strip() else None


async def write_key_tenant(request: Request, runtime: RuntimeDep) -> str:
    """The tenant of the request's write key; 401 problem if it is missing, malformed, unknown or revoked."""
    key = presented_key(request)
    if key is None:
        raise _unauthorized("a write key is required: Authorization: Bearer <key> or X-Metalake-Write-Key")
    tenant = await run_in_threadpool(runtime.store.tenant_for_write_key, key)
    if tenant is None:
        raise _unauthorized("the write key is not valid")
    return tenant


WriteKeyTenant = Annotated[str, Depends(write_key_tenant)]
