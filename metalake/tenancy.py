"""What a tenant id may be. The kernel checks ids (every event carries one); ``tenants`` derives names from them."""

from __future__ import annotations

import re

TENANT_ID_PATTERN = re.compile(r"[a-z][a-z0-9-]{2,39}")

# Ids whose names would collide with the platform's own: `metalake_control` is the control plane's MongoDB database.
RESERVED_TENANT_IDS = frozenset({"control"})


class InvalidTenantId(ValueError):
    """A tenant id that does not match ``[a-z][a-z0-9-]{2,39}``, or a reserved one."""


def validate_tenant_id(tenant_id: str) -> str:
    if not isinstance(tenant_id, str) or not TENANT_ID_PATTERN.fullmatch(tenant_id):
        raise InvalidTenantId(
            f"invalid tenant id {tenant_id!r}: expected 3-40 characters, a lowercase letter first, "
            "then lowercase letters, digits or '-'"
        )
    if tenant_id in RESERVED_TENANT_IDS:
        raise InvalidTenantId(f"invalid tenant id {tenant_id!r}: reserved for the platform")
    return tenant_id
