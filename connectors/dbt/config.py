"""The dbt connector's configuration: where the artifacts are and which URNs the warehouse's tables get."""

from __future__ import annotations

from pydantic import Field, field_validator
from sqlglot.dialects.dialect import Dialect

from control.connectors.plugin import ConnectorConfig


class DbtConfig(ConnectorConfig):
    """``manifest`` and ``catalog`` are paths relative to the tenant's artifact folder (``<root>/<tenant id>/`` of
    ``connect.artifact_roots``). ``platform`` and ``instance`` must be the ones the warehouse's crawler uses, so the
    assets dbt describes are the crawler's (same URNs) and their lineage joins."""

    manifest: str = Field(min_length=1, max_length=1024, description="manifest.json, relative to the tenant's folder.")
    catalog: str | None = Field(
        default=None, max_length=1024, description="catalog.json (column types); without it, the manifest's only."
    )
    platform: str = Field(default="postgres", pattern=r"^[a-z][a-z0-9_-]{0,63}$", description="URN platform.")
    instance: str = Field(min_length=1, description="URN instance: the warehouse server, as its crawler names it.")
    # dbt's database name -> the URN's; for a warehouse whose crawler knows a database under another name.
    databases: dict[str, str] = Field(default_factory=dict)
    dialect: str = Field(default="postgres", pattern=r"^[a-z]{2,32}$", description="sqlglot dialect of compiled SQL.")
    max_artifact_bytes: int = Field(
        default=512 * 1024 * 1024, ge=1024, le=4 * 1024 * 1024 * 1024, description="Larger artifacts are refused."
    )
    max_sql_chars: int = Field(
        default=200_000, ge=1, le=10_000_000, description="Longer compiled SQL is not parsed (table lineage only)."
    )

    @field_validator("dialect")
    @classmethod
    def _known_dialect(cls, value: str) -> str:
        if Dialect.get(value) is None:
            raise ValueError("not a SQL dialect sqlglot knows (postgres, snowflake, bigquery, redshift, duckdb, ...)")
        return value

    @field_validator("manifest", "catalog")
    @classmethod
    def _relative(cls, value: str | None) -> str | None:
        if value is not None and (value.startswith("/") or "\\" in value or ".." in value.split("/")):
            raise ValueError("must be a path relative to the tenant's artifact folder, without '..'")
        return value
