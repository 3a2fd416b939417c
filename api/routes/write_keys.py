"""A tenant's ingest write keys: the keys ``POST /v1/events`` on the connector worker accepts for that tenant.

Created here (the key is in the creation answer only: the control plane stores its SHA-256), listed by id and age,
revoked at once (the ingest API reads the store on every request). Listing needs ``tenant:read`` (or
``tenant:admin``), creating and revoking ``tenant:admin``; both changes are audited like the connectors'. A key may be
created with the PII grant (``{"pii": true}``): only such a key may send events that take PII tags off or stop them
spreading (``control.auth.pii``); the grant is fixed for the key's life.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Path, Response

from api import quotas
from api.context import ContextDep
from api.deps import ConnectorStoreDep, TenantAdmin, TenantReader
from api.problems import Problem
from api.schemas.write_keys import WriteKeyCreate, WriteKeyCreated, WriteKeyInfo, WriteKeysView
from api.services import audit

router = APIRouter(tags=["write-keys"])
PREFIX = "/v1/tenants/{tenant}/write-keys"

KeyId = Annotated[str, Path(pattern=r"^[0-9a-f]{1,64}$", description="The key's id (the part after `mlk_`).")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant or write key (another tenant's objects answer 404 too)."},
}


@router.post(
    PREFIX,
    status_code=201,
    summary="Create an ingest write key",
    response_model=WriteKeyCreated,
    responses={**_ERRORS, **quotas.RESPONSE},
)
def create_write_key(
    tc: TenantAdmin, store: ConnectorStoreDep, ctx: ContextDep, body: WriteKeyCreate | None = None
) -> WriteKeyCreated:
    """A new write key for the tenant's ingest API. Keep it: it is shown this once and cannot be read back. The body
    is optional: ``{"pii": true}`` grants the key what ``pii:read`` grants a token on tags."""
    pii = body is not None and body.pii
    with quotas.claim(ctx, tc.tenant, quotas.WRITE_KEYS):
        info, key = store.write_keys.create(tc.tenant, pii=pii)
    counts = {"pii": 1} if pii else None
    audit.record(ctx, tc.tenant, tc.principal, "write_key.create", info.key_id, audit.DONE, counts=counts)
    return WriteKeyCreated(
        tenant=tc.tenant, key_id=info.key_id, key=key.get_secret_value(), created_at=info.created_at, pii=info.pii
    )


@router.get(PREFIX, summary="List ingest write keys", response_model=WriteKeysView, responses=_ERRORS)
def list_write_keys(tc: TenantReader, store: ConnectorStoreDep) -> WriteKeysView:
    """The tenant's active write keys by id and creation time. Keys themselves are never returned."""
    return WriteKeysView(
        items=[
            WriteKeyInfo(key_id=k.key_id, created_at=k.created_at, pii=k.pii) for k in store.write_keys.of(tc.tenant)
        ]
    )


@router.delete(PREFIX + "/{key_id}", status_code=204, summary="Revoke an ingest write key", responses=_ERRORS)
def revoke_write_key(tc: TenantAdmin, key_id: KeyId, store: ConnectorStoreDep, ctx: ContextDep) -> Response:
    """Revoke the key: the next request that presents it is refused (401)."""
    if not store.write_keys.revoke(tc.tenant, key_id):
        raise Problem(404, "not-found", "no such write key", field="key_id")
    audit.record(ctx, tc.tenant, tc.principal, "write_key.revoke", key_id, audit.DONE)
    return Response(status_code=204)
