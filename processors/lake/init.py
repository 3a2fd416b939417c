"""Create a tenant's Delta tables (and its ``audit`` table) and register them in Trino, so the tenant is queryable
before its first event. Idempotent: tables that exist are left as they are. The admin API runs it when it
provisions a tenant (the API never loads Spark); the streaming job would create the same tables on the first event.

    python -m processors.lake.init --tenant T
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from metalake.settings import get_settings
from metalake.tenancy import InvalidTenantId
from processors.enrichment.catalog import register_tenant_tables
from processors.enrichment.tables import TABLES, ensure_tables
from processors.enrichment.writer import retry_conflicts
from processors.lake.audit import ensure_audit_table
from processors.lake.errors import LakeUsageError
from processors.lake.runner import progress, run
from processors.lake.sparkio import lake_session
from tenants.naming import names_for


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m processors.lake.init", description=__doc__.split("\n")[0])
    parser.add_argument("--tenant", required=True, help="The tenant whose tables to create.")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    settings = get_settings()

    def body() -> dict[str, Any]:
        try:
            names = names_for(args.tenant, settings.lake_root)
        except InvalidTenantId as exc:
            raise LakeUsageError(str(exc)) from None
        spark = lake_session(settings, "metalake-lake-init")
        try:
            progress(f"creating the Delta tables of {names.tenant_id} under {names.lake_dir}")
            added: dict[str, list[str]] = {}
            retry_conflicts(lambda: added.update(ensure_tables(spark, names)), "*")
            ensure_audit_table(spark, settings, names)
        finally:
            spark.stop()
        # Unlike the streaming job (which retries next batch), a failure here must fail provisioning: Trino has to
        # see the tables as soon as the tenant is active.
        registered = register_tenant_tables(settings, names, (*(t.name for t in TABLES), "audit"))
        return {
            "tenant": names.tenant_id,
            "lake_dir": str(names.lake_dir),
            "columns_added": added,
            "registered": registered,
        }

    return run("init", body)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
