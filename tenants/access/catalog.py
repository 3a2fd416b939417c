"""What Trino knows, asked as the service user: the tenants' schemas and the column types of one schema."""

from __future__ import annotations

from metalake.settings import KernelSettings
from metalake.trino_admin import admin_cursor


def schemas(settings: KernelSettings) -> list[str]:
    with admin_cursor(settings, timeout_s=30) as cur:
        cur.execute("SELECT schema_name FROM information_schema.schemata")
        return [str(row[0]) for row in cur.fetchall()]


def tables(settings: KernelSettings, schema: str) -> dict[str, str]:
    """``{table: "BASE TABLE" | "VIEW"}`` of ``schema`` (empty if it does not exist)."""
    with admin_cursor(settings, timeout_s=30) as cur:
        cur.execute("SELECT table_name, table_type FROM information_schema.tables WHERE table_schema = ?", [schema])
        return {str(name): str(kind) for name, kind in cur.fetchall()}


def column_types(settings: KernelSettings, schema: str) -> dict[str, dict[str, str]]:
    """``{table: {column: type}}`` of the tables registered in ``schema`` (empty if it does not exist)."""
    with admin_cursor(settings, timeout_s=30) as cur:
        cur.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = ?",
            [schema],
        )
        out: dict[str, dict[str, str]] = {}
        for table, column, data_type in cur.fetchall():
            out.setdefault(str(table), {})[str(column)] = str(data_type)
        return out
