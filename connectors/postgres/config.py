"""Configuration of the PostgreSQL catalog crawler, and the one place secrets are turned into connection arguments."""

from __future__ import annotations

from fnmatch import fnmatchcase
from typing import Any, ClassVar, Literal

from pydantic import Field, SecretStr

from control.connectors.plugin import ConnectorConfig

# Catalogs of PostgreSQL itself, TOAST storage and other sessions' temporary schemas are never user metadata.
DEFAULT_EXCLUDED_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast*", "pg_temp_*")


class PostgresCatalogConfig(ConnectorConfig):
    """What to crawl and how to reach it. ``repr`` and the JSON Schema never show the password (``SecretStr``)."""

    # sslmode too: a downgrade to "disable" would send the stored password in clear.
    endpoint_fields: ClassVar[tuple[str, ...]] = ("host", "port", "sslmode")

    host: str = Field(min_length=1, description="Server host name or address.")
    port: int = Field(default=5432, ge=1, le=65535)
    user: str = Field(min_length=1)
    password: SecretStr | None = Field(default=None, description="Omit for trust, peer or .pgpass authentication.")
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = "prefer"
    databases: list[str] | None = Field(
        default=None,
        description="Databases to crawl. Default: every non-template database the user may connect to.",
    )
    maintenance_database: str = Field(
        default="postgres", min_length=1, description="Where the list of databases is read when `databases` is unset."
    )
    include_schemas: list[str] = Field(default_factory=lambda: ["*"], description="Glob patterns (case-sensitive).")
    exclude_schemas: list[str] = Field(
        default_factory=lambda: list(DEFAULT_EXCLUDED_SCHEMAS),
        description="Glob patterns (case-sensitive); applied after include_schemas.",
    )
    platform: str = Field(default="postgres", pattern=r"^[a-z][a-z0-9_-]{0,63}$", description="URN platform.")
    instance: str = Field(min_length=1, description="URN instance: which server this is, e.g. 'shop-prod'.")
    fetch_size: int = Field(default=5000, ge=1, le=1_000_000, description="Rows per server-side cursor round trip.")
    connect_timeout_s: int = Field(default=10, ge=1, le=600)

    def schema_selected(self, schema: str) -> bool:
        """True if ``schema`` matches an include pattern and no exclude pattern."""
        return any(fnmatchcase(schema, p) for p in self.include_schemas) and not any(
            fnmatchcase(schema, p) for p in self.exclude_schemas
        )

    def connect_kwargs(self, database: str) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect``. Holds the password in clear: never log or format the result."""
        kwargs: dict[str, Any] = {
            "host": self.host,
            "port": self.port,
            "user": self.user,
            "dbname": database,
            "sslmode": self.sslmode,
            "connect_timeout": self.connect_timeout_s,
            "application_name": "metalake-catalog-crawler",
        }
        if self.password is not None:
            kwargs["password"] = self.password.get_secret_value()
        return kwargs

    def redact(self, text: str) -> str:
        """``text`` with the password removed, for messages built from a driver's error (which may quote the DSN)."""
        if self.password is None:
            return text
        secret = self.password.get_secret_value()
        return text.replace(secret, "***") if secret else text
