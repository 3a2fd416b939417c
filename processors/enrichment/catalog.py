"""Registering a tenant's Delta tables in Trino's ``lake`` catalog (file metastore), idempotently."""

from __future__ import annotations

import logging

from metalake.settings import Settings
from metalake.trino_admin import admin_cursor
from tenants.naming import TenantNames

log = logging.getLogger(__name__)


def _location(settings: Settings, names: TenantNames, table: str | None = None) -> str:
    """A ``local://`` URI relative to the catalog's local.location (the lake root)."""
    path = names.delta_path(table) if table else names.lake_dir
    return "local:///" + str(path.relative_to(settings.lake_root))


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def register_tenant_tables(settings: Settings, names: TenantNames, tables: tuple[str, ...]) -> list[str]:
    """Create the tenant's schema and register the tables Trino does not know yet; return those registered."""
    catalog = settings.trino.catalog
    schema = names.trino_schema
    with admin_cursor(settings) as cur:
        # DDL and CALL take no bind parameters in Trino: literals, from validated tenant ids and fixed table names.
        cur.execute(
            f'CREATE SCHEMA IF NOT EXISTS {catalog}."{schema}" WITH (location = {_literal(_location(settings, names))})'
        )
        cur.fetchall()
        # The catalog name is operator configuration, not request input; the schema is a bound parameter.
        cur.execute(f"SELECT table_name FROM {catalog}.information_schema.tables WHERE table_schema = ?", [schema])  # noqa: S608
        known = {row[0] for row in cur.fetchall()}
        registered = []
        for table in tables:
            name = names.trino_table(table)
            if name in known:
                continue
            cur.execute(
                f"CALL {catalog}.system.register_table(schema_name => {_literal(schema)}, "
                f"table_name => {_literal(name)}, table_location => {_literal(_location(settings, names, table))})"
            )
            cur.fetchall()
            registered.append(name)
        return registered
