"""The Trino schema of a tenant as the stack's processes name it: keyed under the stack's key
(``tenants.trino_schemas``), never the tenant id alone."""

from __future__ import annotations

from metalake.settings import load_settings
from ops.settings import Settings
from tenants.naming import TenantNames
from tenants.trino_schemas import trino_schema


def schema_of(tenant: TenantNames | str) -> str:
    """``tenant`` (an id, or its names) -> its Trino schema under the settings the stack's processes read.

    Read afresh (not ``get_settings``, cached for the process): on a fresh clone the unit tests that run first in
    the same session read settings before the stack's first start writes its key to stack.env."""
    return trino_schema(load_settings(Settings), tenant if isinstance(tenant, str) else tenant.tenant_id)
