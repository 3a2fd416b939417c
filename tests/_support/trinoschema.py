"""The Trino schema of a tenant as the stack's processes name it: keyed under the stack's key
(``tenants.trino_schemas``), never the tenant id alone."""

from __future__ import annotations

from metalake.settings import get_settings
from tenants.naming import TenantNames
from tenants.trino_schemas import trino_schema


def schema_of(tenant: TenantNames | str) -> str:
    """``tenant`` (an id, or its names) -> its Trino schema under the settings the stack's processes read."""
    return trino_schema(get_settings(), tenant if isinstance(tenant, str) else tenant.tenant_id)
