"""Helpers for the Trino access tests: a tenant data table written with delta-rs, queries as a given Trino user, a
tenant's schema dropped."""

from __future__ import annotations

from typing import Any

import trino
from arro3.core import Array, DataType, Field, Schema, Table
from deltalake import write_deltalake

from metalake.trino_connect import connect
from ops.settings import Settings
from tenants.naming import TenantNames
from tests._support.trinoschema import schema_of

EMAILS = ["ada@example.org", "bob@example.org"]
PII_COLUMNS = ("email", "phone", "name", "street", "iban")


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def make_data_table(
    settings: Settings, cursor: Any, names: TenantNames, table: str, *, in_schema: str | None = None
) -> None:
    """A small Delta table written by delta-rs into the tenant's lake folder, registered in its Trino schema (or
    ``in_schema``)."""
    trino_schema = in_schema or schema_of(names)
    schema = Schema(
        [Field("id", DataType.int64(), nullable=True)]
        + [Field(c, DataType.string(), nullable=True) for c in PII_COLUMNS]
    )
    arrays = [Array([1, 2], DataType.int64())] + [
        Array(EMAILS if c == "email" else [f"{c}-1", f"{c}-2"], DataType.string()) for c in PII_COLUMNS
    ]
    path = names.lake_dir / table
    path.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(path), Table.from_arrays(arrays, schema=schema), mode="overwrite")
    location = "local:///" + str(names.lake_dir.relative_to(settings.lake_root))
    cursor.execute(f'CREATE SCHEMA IF NOT EXISTS lake."{trino_schema}" WITH (location = {_literal(location)})')
    cursor.fetchall()
    cursor.execute(
        f"CALL lake.system.register_table(schema_name => {_literal(trino_schema)}, "
        f"table_name => {_literal(table)}, table_location => {_literal(location + '/' + table)})"
    )
    cursor.fetchall()


def connect_as(settings: Settings, user: str) -> trino.dbapi.Connection:
    """A connection whose queries run as ``user``: a service user authenticates with its own password; any other
    user (a tenant's) is impersonated by the platform user, as the API's SQL endpoint does."""
    if user in settings.trino.passwords:
        return connect(settings, user=user)
    return connect(settings, session_user=user)


def query_as(settings: Settings, user: str, sql: str) -> list[list[Any]] | str:
    """Rows, or the Trino error name when the query fails."""
    conn = connect_as(settings, user)
    try:
        cur = conn.cursor()
        cur.execute(sql)
        return [list(r) for r in cur.fetchall()]
    except trino.exceptions.TrinoUserError as exc:
        return str(exc.error_name)
    finally:
        conn.close()


def drop_schema(settings: Settings, cursor: Any, names: TenantNames) -> None:
    """Drop the tenant's Trino schema: views dropped, tables unregistered (their data stays), then the schema."""
    catalog, schema = settings.trino.catalog, schema_of(names)
    cursor.execute(
        f"SELECT table_name, table_type FROM {catalog}.information_schema.tables WHERE table_schema = ?",
        [schema],
    )
    for table, table_type in cursor.fetchall():
        if table_type == "VIEW":
            cursor.execute(f'DROP VIEW IF EXISTS {catalog}."{schema}"."{table}"')
        else:
            cursor.execute(
                f"CALL {catalog}.system.unregister_table(schema_name => {_literal(schema)}, "
                f"table_name => {_literal(table)})"
            )
        cursor.fetchall()
    cursor.execute(f'DROP SCHEMA IF EXISTS {catalog}."{schema}"')
    cursor.fetchall()
