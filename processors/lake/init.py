"""Create a tenant's Delta tables (and its ``audit`` table) and register them in Trino, so the tenant is queryable
before its first event. Idempotent: tables that exist are left as they are. A dedicated tenant gets its own tables;
a pooled tenant's data goes to the shared tables (created here if missing, as the streaming job does at start) and
its schema gets views over them. The admin API runs it when it provisions a dedicated tenant (the API never loads
Spark, and neither does this command: the tables are delta-rs commits, ``processors.enrichment.tables``).

    python -m processors.lake init --tenant T [--dedicated]
"""

from __future__ import annotations

from typing import Any

from metalake.s3 import lake_storage_options
from metalake.tenancy import InvalidTenantId
from processors.enrichment.tables import Layout, ensure_tables
from processors.lake.audit import ensure_audit_table
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress
from processors.lake.settings import LakeWorkerSettings
from tenants.lake_catalog import register_pooled_tables, register_tables, register_tenant
from tenants.naming import names_for


def init_report(settings: LakeWorkerSettings, tenant: str, dedicated: bool) -> dict[str, Any]:
    """The report of ``python -m processors.lake init`` (``processors.lake.main``): progress on stderr."""
    try:
        names = names_for(tenant, settings.lake_root, dedicated=dedicated)
    except InvalidTenantId as exc:
        raise LakeUsageError(str(exc)) from None
    layout = Layout(settings.lake_root, names if names.dedicated else None)
    progress(f"creating the Delta tables of {names.tenant_id} under {layout.path('events').rsplit('/', 2)[0]}")
    added = ensure_tables(layout.tables(), lake_storage_options(settings))
    ensure_audit_table(settings, names)
    # Unlike the streaming job (which retries next batch), a failure here must fail provisioning: Trino has to
    # see the tables as soon as the tenant is active.
    if not names.dedicated:
        register_pooled_tables(settings)
    registered = [*register_tenant(settings, names), *register_tables(settings, names, ("audit",))]
    return {
        "tenant": names.tenant_id,
        "lake_dir": str(names.lake_dir),
        "columns_added": added,
        "registered": registered,
    }
