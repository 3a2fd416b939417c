"""Configuration of the PostgreSQL catalog crawler, and the one place secrets are turned into connection arguments."""

from __future__ import annotations

import ipaddress
import os
import re
from fnmatch import fnmatchcase
from typing import Any, ClassVar, Final, Literal

from pydantic import Field, SecretStr, field_validator

from control.connectors.plugin import ConnectorConfig

# Catalogs of PostgreSQL itself, TOAST storage and other sessions' temporary schemas are never user metadata.
DEFAULT_EXCLUDED_SCHEMAS = ("pg_catalog", "information_schema", "pg_toast*", "pg_temp_*")

# One DNS name (RFC 1123 labels) or one IP address literal: libpq reads a host starting with '/' or '@' as a Unix
# socket directory or abstract socket, and a comma as a list of hosts to try in turn; both would bypass the address
# guard, so neither gets past validation.
_LABEL = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_HOSTNAME = re.compile(rf"{_LABEL}(?:\.{_LABEL})*\.?")
# libpq expands a database name that looks like a connection string or URI into connection options (host, service,
# passfile...) where it is given the chance; such a name is never a real database of a crawl.
_DSN_LIKE = re.compile(r"=|^postgres(?:ql)?://", re.IGNORECASE)
# Authentication methods that prove the configured password; libpq refuses the others before the connection
# completes. Not ``password``, which sends it in clear: only a config that allows it explicitly adds it.
PASSWORD_AUTH = "md5,scram-sha-256"  # noqa: S105 - method names, not a password
CLEARTEXT_AUTH = "password"  # a method name
# The modes that check the server's certificate against a CA and its name against ``host``: nothing less stops an
# on-path attacker from posing as the server (and being sent the password, or its MD5 for a replay).
VERIFIED: Final = "verify-full"


def _checked_database(name: str) -> str:
    if _DSN_LIKE.search(name):
        raise ValueError("must be a database name, not a connection string")
    if "\x00" in name:
        raise ValueError("must not contain NUL")
    return name


class PostgresCatalogConfig(ConnectorConfig):
    """What to crawl and how to reach it. ``repr`` and the JSON Schema never show the password (``SecretStr``)."""

    # sslmode too: a downgrade to "disable" would send the stored password in clear; so would allowing cleartext.
    endpoint_fields: ClassVar[tuple[str, ...]] = ("host", "port", "sslmode", "allow_cleartext_password")

    host: str = Field(
        min_length=1,
        max_length=253,
        description="Server host name or IP address (one; no socket path). Must resolve to addresses the worker's "
        "SSRF guard allows: public ones, unless the operator allowed a network (connect.ssrf_allow).",
    )
    port: int = Field(default=5432, ge=1, le=65535)
    user: str = Field(min_length=1)
    password: SecretStr = Field(
        min_length=1,
        description="Required: crawls authenticate with a password only (trust, peer and .pgpass are refused).",
    )
    sslmode: Literal["disable", "allow", "prefer", "require", "verify-ca", "verify-full"] = Field(
        default=VERIFIED,
        description="TLS: verify-full (the default) checks the server's certificate and host name, against the "
        "system's CAs or the worker's connect.source_tls_ca_file. Anything else is an explicit opt-out (a local or "
        "test server without TLS): an on-path attacker can then pose as the server.",
    )
    allow_cleartext_password: bool = Field(
        default=False,
        description="Let the server ask for the password in clear (PostgreSQL's 'password' method). Off: only md5 "
        "and scram-sha-256 are answered. An explicit opt-out for old servers; the password then reaches whoever "
        "answers, so only with sslmode verify-full.",
    )
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
    view_lineage: bool = Field(
        default=True, description="Lineage edges of views from their definitions (table and column level)."
    )
    max_view_definition_chars: int = Field(
        default=200_000,
        ge=1,
        le=10_000_000,
        description="Longer view definitions are not parsed (table-level edges only): bounds a crawl's parse time.",
    )

    @field_validator("host")
    @classmethod
    def _one_network_host(cls, host: str) -> str:
        try:
            ipaddress.ip_address(host.strip("[]") if host.startswith("[") and host.endswith("]") else host)
        except ValueError:
            if not _HOSTNAME.fullmatch(host):
                raise ValueError("must be one host name or IP address (no socket path, list or options)") from None
        return host

    @field_validator("maintenance_database")
    @classmethod
    def _maintenance_is_a_name(cls, name: str) -> str:
        return _checked_database(name)

    @field_validator("databases")
    @classmethod
    def _databases_are_names(cls, names: list[str] | None) -> list[str] | None:
        return None if names is None else [_checked_database(n) for n in names]

    def schema_selected(self, schema: str) -> bool:
        """True if ``schema`` matches an include pattern and no exclude pattern."""
        return any(fnmatchcase(schema, p) for p in self.include_schemas) and not any(
            fnmatchcase(schema, p) for p in self.exclude_schemas
        )

    def connect_kwargs(
        self, database: str, hostaddr: str, *, require_password: bool = True, ca_file: str | None = None
    ) -> dict[str, Any]:
        """Keyword arguments for ``psycopg.connect`` to ``hostaddr`` (the address the SSRF guard checked: libpq does
        no lookup of its own), with ``host`` kept for TLS (SNI, and the name ``verify-full`` checks) and, when TLS is
        verified, the CAs to trust (``ca_file``, else the system's). Holds the password in clear: never log or
        format the result."""
        kwargs: dict[str, Any] = {
            "host": self.host.strip("[]"),
            "hostaddr": hostaddr,
            "port": self.port,
            "user": self.user,
            "dbname": database,
            "sslmode": self.sslmode,
            "connect_timeout": self.connect_timeout_s,
            "application_name": "metalake-catalog-crawler",
            "password": self.password.get_secret_value(),
            # Never the worker's own password file: what it holds is not the tenant's to use.
            "passfile": os.devnull,
        }
        if self.sslmode in ("verify-ca", VERIFIED):
            # Not libpq's default (~/.postgresql/root.crt of the worker's user): the operator's bundle or the system's.
            kwargs["sslrootcert"] = ca_file or "system"
        if require_password:
            kwargs["require_auth"] = PASSWORD_AUTH + (f",{CLEARTEXT_AUTH}" if self.allow_cleartext_password else "")
        return kwargs

    def redact(self, text: str) -> str:
        """``text`` with the password removed, for messages built from a driver's error (which may quote the DSN)."""
        secret = self.password.get_secret_value()
        return text.replace(secret, "***") if secret else text
