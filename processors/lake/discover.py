"""Which tenants exist in the lake: folders under the lake root named like a tenant id. Pure file-system reads."""

from __future__ import annotations

from pathlib import Path

from metalake.tenancy import InvalidTenantId
from processors.lake.errors import LakeUsageError
from tenants.naming import TenantNames, names_for, validate_tenant_id


def lake_tenants(lake_root: Path) -> list[str]:
    """Tenant ids with a folder under ``lake_root``, sorted. Folders that are not tenant ids (``_unrouted``, Trino's
    ``_trino_metastore``) are skipped; a missing lake root means no tenants."""
    if not lake_root.is_dir():
        return []
    found = []
    for child in sorted(lake_root.iterdir()):
        if not child.is_dir():
            continue
        try:
            found.append(validate_tenant_id(child.name))
        except InvalidTenantId:
            continue
    return found


def tenant_names(tenant: str, lake_root: Path) -> TenantNames:
    """The names of an existing tenant. Raises LakeUsageError (naming the folder looked at) when the id is invalid
    or the tenant has no folder in the lake: a typo must not silently act on nothing."""
    try:
        names = names_for(tenant, lake_root)
    except InvalidTenantId as exc:
        raise LakeUsageError(str(exc)) from None
    if not names.lake_dir.is_dir():
        raise LakeUsageError(f"unknown tenant {tenant!r}: no lake folder at {names.lake_dir}")
    return names


def selected_tenants(tenant: str | None, lake_root: Path) -> list[TenantNames]:
    """One named tenant (which must exist) or every tenant found under the lake root."""
    if tenant is not None:
        return [tenant_names(tenant, lake_root)]
    return [names_for(t, lake_root) for t in lake_tenants(lake_root)]
