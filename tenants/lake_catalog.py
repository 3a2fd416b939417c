"""What Trino's ``lake`` catalog holds for each tenant, created idempotently through the platform's Trino user.

Every tenant reads its schema (``tenants.trino_schemas.trino_schema``) with the same table names and columns whatever
its tier:
- the shared pooled tables are registered once in the ``_pooled`` schema, which no tenant's access rules grant;
- a pooled tenant's schema holds a ``SECURITY DEFINER`` view per table that selects its rows (its bucket first, so
  Trino prunes to the bucket's files) without the tenant columns; the view runs with the platform's rights, so the
  tenant's user needs SELECT on its own schema only, and never sees the shared table, its rows of other tenants or
  its metadata tables (``$history``, ``$files``, ``$partitions``, ``$properties``: views have none);
- a dedicated tenant's schema holds its own tables, registered by location;
- every tenant's schema holds the view ``assets_with_edits``: its assets with a person's edits (``asset_edits``) laid
  over the sources' description, owners and properties (docs/edits.md), ``SECURITY INVOKER`` so the reader's own
  rights and masks apply to the tables it reads.
DDL and CALL take no bind parameters in Trino: names are literals built from validated tenant ids and fixed names.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from metalake.lake_uri import LakeRoot, S3Path
from metalake.settings import KernelSettings
from metalake.trino_admin import admin_cursor
from tenants.naming import POOLED_TABLES, TENANT_COLUMNS, TRINO_POOLED_SCHEMA, TenantNames, pooled_table_path
from tenants.trino_schemas import trino_schema


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _location(settings: KernelSettings, path: LakeRoot) -> str:
    """Where Trino finds ``path``: its ``s3://`` URI on an S3 lake (the catalog's native S3 file system), else a
    ``local://`` URI relative to the catalog's local.location (the lake root)."""
    if isinstance(path, S3Path):
        return path.uri("s3")
    return "local:///" + str(path.relative_to(settings.lake_root))


def _known_tables(cur: Any, catalog: str, schema: str) -> set[str]:  # noqa: ANN401
    # The catalog name is operator configuration, not request input; the schema is a bound parameter.
    cur.execute(f"SELECT table_name FROM {catalog}.information_schema.tables WHERE table_schema = ?", [schema])  # noqa: S608
    return {row[0] for row in cur.fetchall()}


def _register(cur: Any, settings: KernelSettings, schema: str, tables: Iterable[tuple[str, LakeRoot]]) -> list[str]:  # noqa: ANN401
    catalog = settings.trino.catalog
    known = _known_tables(cur, catalog, schema)
    registered = []
    for name, path in tables:
        if name in known:
            continue
        cur.execute(
            f"CALL {catalog}.system.register_table(schema_name => {_literal(schema)}, "
            f"table_name => {_literal(name)}, table_location => {_literal(_location(settings, path))})"
        )
        cur.fetchall()
        registered.append(name)
    return registered


def _create_schema(cur: Any, settings: KernelSettings, names: TenantNames) -> None:  # noqa: ANN401
    """The tenant's schema; a dedicated tenant's located at its lake folder. A pooled tenant's schema holds views
    (and the ``audit`` table, registered by location), so it needs no folder of its own."""
    where = f" WITH (location = {_literal(_location(settings, names.lake_dir))})" if names.dedicated else ""
    schema = trino_schema(settings, names.tenant_id)
    cur.execute(f'CREATE SCHEMA IF NOT EXISTS {settings.trino.catalog}."{schema}"{where}')
    cur.fetchall()


def register_pooled_tables(settings: KernelSettings, tables: Sequence[str] = POOLED_TABLES) -> list[str]:
    """Register the shared tables (which must exist in the lake) in the ``_pooled`` schema; return those new."""
    catalog = settings.trino.catalog
    with admin_cursor(settings) as cur:
        cur.execute(f'CREATE SCHEMA IF NOT EXISTS {catalog}."{TRINO_POOLED_SCHEMA}"')
        cur.fetchall()
        return _register(
            cur, settings, TRINO_POOLED_SCHEMA, ((t, pooled_table_path(settings.lake_root, t)) for t in tables)
        )


def pooled_columns(settings: KernelSettings) -> dict[str, list[str]]:
    """The columns of each registered shared table, in table order, without the tenant columns."""
    catalog = settings.trino.catalog
    with admin_cursor(settings) as cur:
        cur.execute(
            f"SELECT table_name, column_name FROM {catalog}.information_schema.columns "  # noqa: S608 - see above
            "WHERE table_schema = ? ORDER BY table_name, ordinal_position",
            [TRINO_POOLED_SCHEMA],
        )
        out: dict[str, list[str]] = {}
        for table, column in cur.fetchall():
            if column not in TENANT_COLUMNS:
                out.setdefault(table, []).append(column)
        return out


def view_sql(catalog: str, schema: str, names: TenantNames, table: str, columns: Sequence[str]) -> str:
    """The tenant's view (in its ``schema``) of a shared table: its rows, the table's columns less the tenant
    columns."""
    lake_table = names.table(table)
    if not lake_table.shared:
        raise ValueError(f"{names.tenant_id} is dedicated: its tables are its own, not views")
    selected = ", ".join(f'"{c}"' for c in columns)
    view = f'{catalog}."{schema}"."{names.trino_table(table)}"'
    shared = f'{catalog}."{TRINO_POOLED_SCHEMA}"."{table}"'
    query = f"SELECT {selected} FROM {shared} WHERE {lake_table.predicate}"  # noqa: S608 - validated names only
    return f"CREATE OR REPLACE VIEW {view} SECURITY DEFINER AS {query}"


EDITED_ASSETS_VIEW = "assets_with_edits"
# ``properties.<name>`` edits: the name starts after this many characters.
_PROPERTY_NAME_AT = len("properties.") + 1


def edited_assets_sql(catalog: str, schema: str, names: TenantNames) -> str:
    """The tenant's view of its assets as readers show them: a live edit of the description or the owners replaces
    the source's value, edited properties are laid over the source's map (``map_concat`` keeps the last map's value of
    a key), and ``edited`` lists the aspects a person set. The same rule as ``catalog.projection.apply_edits``."""
    qualified = f'{catalog}."{schema}"'
    assets = f'{qualified}."{names.trino_table("assets")}"'
    edits = f'{qualified}."{names.trino_table("asset_edits")}"'
    live = f"(SELECT * FROM {edits} WHERE NOT deleted)"  # noqa: S608 - validated names only
    empty = "CAST(MAP() AS map(varchar, varchar))"
    query = (
        "SELECT a.urn, a.kind, a.name, a.platform, a.qualified_name,"  # noqa: S608 - validated names only
        " IF(d.urn IS NULL, a.description, d.text) AS description, a.data_type,"
        " IF(o.urn IS NULL, a.owners, o.owners) AS owners,"
        f" IF(p.urn IS NULL, a.properties, map_concat(coalesce(a.properties, {empty}), p.properties)) AS properties,"
        " coalesce(x.edited, CAST(ARRAY[] AS array(varchar))) AS edited,"
        " a.deleted, a.version, a.event_id, a.event_time, a.updated_at"
        f" FROM {assets} a"
        f" LEFT JOIN {live} d ON d.urn = a.urn AND d.aspect = 'description'"
        f" LEFT JOIN {live} o ON o.urn = a.urn AND o.aspect = 'owners'"
        f" LEFT JOIN (SELECT urn, map_agg(substr(aspect, {_PROPERTY_NAME_AT}), text) AS properties FROM {live} e"
        " WHERE aspect LIKE 'properties.%' AND text IS NOT NULL GROUP BY urn) p ON p.urn = a.urn"
        f" LEFT JOIN (SELECT urn, array_sort(array_agg(aspect)) AS edited FROM {live} e GROUP BY urn) x"
        " ON x.urn = a.urn"
    )
    return f'CREATE OR REPLACE VIEW {qualified}."{EDITED_ASSETS_VIEW}" SECURITY INVOKER AS {query}'


def _create_edited_assets_view(cur: Any, settings: KernelSettings, names: TenantNames, known: set[str]) -> list[str]:  # noqa: ANN401
    if EDITED_ASSETS_VIEW in known:
        return []
    cur.execute(edited_assets_sql(settings.trino.catalog, trino_schema(settings, names.tenant_id), names))
    cur.fetchall()
    return [EDITED_ASSETS_VIEW]


def register_tenant(
    settings: KernelSettings,
    names: TenantNames,
    tables: Sequence[str] = POOLED_TABLES,
    columns: dict[str, list[str]] | None = None,
    *,
    replace: bool = False,
) -> list[str]:
    """Create the tenant's schema and what it reads: views over the shared tables (pooled) or its own tables
    registered by location (dedicated). Returns the tables or views created. A pooled tenant's existing views are
    kept unless ``replace`` (after the shared tables gained columns); ``columns`` saves a lookup per tenant."""
    catalog = settings.trino.catalog
    schema = trino_schema(settings, names.tenant_id)
    with admin_cursor(settings) as cur:
        _create_schema(cur, settings, names)
        if names.dedicated:
            registered = _register(cur, settings, schema, ((t, names.delta_path(t)) for t in tables))
            if not {"assets", "asset_edits"} <= set(tables):
                return registered
            return [*registered, *_create_edited_assets_view(cur, settings, names, _known_tables(cur, catalog, schema))]
        known = set() if replace else _known_tables(cur, catalog, schema)
        shared = columns if columns is not None else pooled_columns(settings)
        missing = [t for t in tables if t not in shared]
        if missing:
            raise LookupError(f"shared tables not registered in Trino yet: {', '.join(missing)}")
        created = []
        for table in tables:
            if names.trino_table(table) in known:
                continue
            cur.execute(view_sql(catalog, schema, names, table, shared[table]))
            cur.fetchall()
            created.append(table)
        if {"assets", "asset_edits"} <= set(tables):
            created += _create_edited_assets_view(cur, settings, names, known)
        return created


def register_tables(settings: KernelSettings, names: TenantNames, tables: Sequence[str]) -> list[str]:
    """Register tables of the tenant's own folder (a dedicated tenant's data, any tenant's ``audit``) in its schema;
    return those new."""
    with admin_cursor(settings) as cur:
        _create_schema(cur, settings, names)
        schema = trino_schema(settings, names.tenant_id)
        return _register(cur, settings, schema, ((t, names.delta_path(t)) for t in tables))


def _objects(cur: Any, catalog: str, schema: str) -> dict[str, str]:  # noqa: ANN401
    """``{name: "BASE TABLE" | "VIEW"}`` of a schema (empty if it does not exist)."""
    cur.execute(
        f"SELECT table_name, table_type FROM {catalog}.information_schema.tables WHERE table_schema = ?",  # noqa: S608
        [schema],
    )
    return {str(name): str(kind) for name, kind in cur.fetchall()}


def drop_schema(settings: KernelSettings, schema: str) -> None:
    """Drop a schema, views and tables first; unregistering a table leaves its data alone. Nothing if it is gone."""
    catalog = settings.trino.catalog
    with admin_cursor(settings) as cur:
        cur.execute(f"SELECT schema_name FROM {catalog}.information_schema.schemata WHERE schema_name = ?", [schema])  # noqa: S608
        if not cur.fetchall():
            return
        for table, table_type in _objects(cur, catalog, schema).items():
            # DDL takes no bind parameters; the schema is a tenant's (validated), the names Trino's own listing.
            if table_type == "VIEW":
                cur.execute(f'DROP VIEW IF EXISTS {catalog}."{schema}"."{table.replace(chr(34), chr(34) * 2)}"')
            else:
                cur.execute(
                    f"CALL {catalog}.system.unregister_table(schema_name => {_literal(schema)}, "
                    f"table_name => {_literal(table)})"
                )
            cur.fetchall()
        cur.execute(f'DROP SCHEMA IF EXISTS {catalog}."{schema}"')
        cur.fetchall()


# The views metalake creates in a tenant's schema: a schema move re-creates them rather than moving them (Trino's
# Delta connector renames tables across schemas, not views).
_OWN_VIEWS = frozenset({*POOLED_TABLES, EDITED_ASSETS_VIEW})


def move_schema(settings: KernelSettings, names: TenantNames, old: str) -> list[str]:
    """Move what the tenant's schema ``old`` holds into its current schema (``trino_schema``): tables are renamed
    into it (their data and registration unchanged), metalake's views re-created there. ``old`` is dropped once
    empty; returns what stays in it (a view metalake did not create, a table the new schema already has by that
    name), for an operator to move. Idempotent: a second run finds less to move."""
    catalog, new = settings.trino.catalog, trino_schema(settings, names.tenant_id)
    with admin_cursor(settings) as cur:
        objects = _objects(cur, catalog, old)
        _create_schema(cur, settings, names)
        known, left = _known_tables(cur, catalog, new), []
        for name, kind in sorted(objects.items()):
            if (kind == "VIEW" and name not in _OWN_VIEWS) or (kind != "VIEW" and name in known):
                left.append(name)
            elif kind != "VIEW":
                quoted = name.replace('"', '""')
                cur.execute(f'ALTER TABLE {catalog}."{old}"."{quoted}" RENAME TO {catalog}."{new}"."{quoted}"')
                cur.fetchall()
    # A dedicated tenant's tables are in place already (registering them is then a no-op); a pooled one's views and
    # either's assets_with_edits are created.
    tables = [t for t in POOLED_TABLES if t in objects]
    if tables:
        register_tenant(settings, names, tables)
    with admin_cursor(settings) as cur:
        for view in sorted(v for v, kind in objects.items() if kind == "VIEW" and v in _OWN_VIEWS):
            cur.execute(f'DROP VIEW IF EXISTS {catalog}."{old}"."{view}"')
            cur.fetchall()
    if not left:
        drop_schema(settings, old)
    return left
