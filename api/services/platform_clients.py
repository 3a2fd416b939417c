"""Platform-admin API clients: list, rotate, revoke, for the routes (``/v1/platform/clients``) and the CLI
(``metalake api list-admins | rotate-admin | revoke-admin``) alike.

Platform administrators have no tenant, so their clients are not reachable through ``/v1/tenants/{t}/clients``; they
are created on the host (``metalake api create-admin``). Every change lands in the platform's audit table (the same
one as the tenant lifecycle, ``GET /v1/audit``), refusals included.

Revoking the last active platform admin is refused unless forced: nobody could then manage tenants through the API
until an operator runs ``metalake api create-admin`` on the host. The check and the revocation are two operations
(FerretDB has no transactions), so two concurrent revocations of the last two admins can both pass; the guard is
against mistakes, and the host's ``create-admin`` is always the way back.
"""

from __future__ import annotations

from api.context import ApiContext
from api.services import audit
from control.auth.clients import ClientRecord, ClientStore, Role
from control.auth.principal import Principal


class LastPlatformAdmin(Exception):
    """Revoking this client would leave no active platform admin (and ``force`` was not given)."""


def get_admin(store: ClientStore, client_id: str) -> ClientRecord | None:
    """The platform-admin client ``client_id``; ``None`` for a missing one and for any tenant's client alike."""
    record = store.get(client_id)
    if record is None or record.role is not Role.PLATFORM_ADMIN or record.tenant is not None:
        return None
    return record


def list_admins(store: ClientStore, *, after: str | None, limit: int) -> list[ClientRecord]:
    return store.list_platform_admins(after=after, limit=limit)


def rotate_admin(
    ctx: ApiContext, store: ClientStore, principal: Principal, client_id: str, overlap_s: int
) -> tuple[ClientRecord, str] | None:
    """A new secret for the platform admin (the previous one stays valid ``overlap_s`` seconds), audited; ``None``
    if there is no such active platform admin. :class:`control.auth.clients.ClientConflict` on a concurrent change."""
    if get_admin(store, client_id) is None:
        return None
    rotated = store.rotate(client_id, overlap_s)
    if rotated is not None:
        audit.record_platform(ctx, principal, "client.rotate", client_id, audit.DONE)
    return rotated


def revoke_admin(
    ctx: ApiContext, store: ClientStore, principal: Principal, client_id: str, *, force: bool
) -> ClientRecord | None:
    """Revoke the platform admin (its secrets and its tokens stop working), audited; ``None`` if there is no such
    platform admin. :class:`LastPlatformAdmin` (audited as refused) if it is the last active one and not ``force``."""
    record = get_admin(store, client_id)
    if record is None:
        return None
    if record.active and not force and store.other_active_platform_admins(client_id) == 0:
        audit.record_platform(ctx, principal, "client.revoke", client_id, audit.REFUSED)
        raise LastPlatformAdmin(client_id)
    revoked = store.revoke(client_id)
    if revoked is not None:
        audit.record_platform(ctx, principal, "client.revoke", client_id, audit.DONE)
    return revoked
