"""What Trino knows, asked as the service user: the tenants' schemas and the column types of one schema."""

from __future__ import annotations

from typing import Any

import trino

from metalake.settings import Settings


def _connect(settings: Settings) -> Any:
    return trino.dbapi.connect(
        host=settings.trino.host,
        port=settings.trino.port,
        user=settings.trino.user,
        catalog=settings.trino.catalog,
        request_timeout=30,
    )


def schemas(settings: Settings) -> list[str]:
    conn = _connect(settings)
    try:
        cur = conn.cursor()
        cur.execute("SELECT schema_name FROM information_schema.schemata")
        return [str(row[0]) for row in cur.fetchall()]
    finally:
        conn.close()


def column_types(settings: Settings, schema: str) -> dict[str, dict[str, str]]:
    """``{table: {column: type}}`` of the tables registered in ``schema`` (empty if it does not exist)."""
    conn = _connect(settings)
    try:
        cur = conn.cursor()
        cur.execute(
            "SELECT table_name, column_name, data_type FROM information_schema.columns WHERE table_schema = ?",
            [schema],
        )
        out: dict[str, dict[str, str]] = {}
        for table, column, data_type in cur.fetchall():
            out.setdefault(str(table), {})[str(column)] = str(data_type)
        return out
    finally:
        conn.close()
