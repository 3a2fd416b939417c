"""The dbt connector's configuration: where the artifacts are and which URNs the warehouse's tables get."""

from __future__ import annotations

import re
import urllib.parse
from typing import ClassVar

from pydantic import Field, SecretStr, field_validator, model_validator
from sqlglot.dialects.dialect import Dialect

from control.connectors.plugin import ConnectorConfig

# S3's bucket naming rule (3 to 63 lower-case letters, digits, dots and hyphens, a letter or digit at each end).
_BUCKET = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")


def s3_location(value: str) -> tuple[str, str] | None:
    """(bucket, key) of an ``s3://bucket/key`` artifact; None for a local path."""
    if not value.startswith("s3://"):
        return None
    bucket, _, key = value.removeprefix("s3://").partition("/")
    return bucket, key


class DbtConfig(ConnectorConfig):
    """``manifest`` and ``catalog`` are paths relative to the tenant's artifact folder (``<root>/<tenant id>/`` of
    ``connect.artifact_roots``), or ``s3://bucket/key`` objects read with the ``s3_*`` fields (the key pair is
    secret: sealed at rest, never shown). ``platform`` and ``instance`` must be the ones the warehouse's crawler
    uses, so the assets dbt describes are the crawler's (same URNs) and their lineage joins."""

    # Where the S3 key pair is sent: a change of one requires the key pair again.
    endpoint_fields: ClassVar[tuple[str, ...]] = ("s3_endpoint", "s3_path_style")

    manifest: str = Field(
        min_length=1, max_length=1100, description="manifest.json: relative to the tenant's folder, or s3://bucket/key."
    )
    catalog: str | None = Field(
        default=None, max_length=1100, description="catalog.json (column types); without it, the manifest's only."
    )
    s3_endpoint: str | None = Field(
        default=None,
        max_length=1024,
        description="S3 API base URL (SeaweedFS, MinIO, GCS interop...); unset: AWS's, by s3_region. Its host must "
        "resolve to addresses the worker's SSRF guard allows (connect.ssrf_allow).",
    )
    s3_region: str = Field(default="us-east-1", pattern=r"^[a-z0-9-]{1,32}$", description="Region signed for.")
    s3_path_style: bool = Field(default=True, description="Bucket in the path (false: in the host name).")
    s3_access_key_id: SecretStr | None = Field(default=None, min_length=1, max_length=256)
    s3_secret_access_key: SecretStr | None = Field(default=None, min_length=1, max_length=256)
    s3_timeout_s: float = Field(default=30.0, ge=1, le=600, description="Per connect and per read of a GET.")
    s3_download_deadline_s: float = Field(
        default=600.0, ge=1, le=3600, description="The most one artifact's download may take, however it trickles."
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
        if value is None:
            return None
        location = s3_location(value)
        if location is not None:
            bucket, key = location
            if not _BUCKET.fullmatch(bucket) or not key or len(key.encode()) > 1024 or "\x00" in key:
                raise ValueError("must be s3://bucket/key (an S3 bucket name, a key of 1 to 1024 bytes)")
            return value
        if "://" in value:
            raise ValueError("must be a relative path or s3://bucket/key (no other scheme is read)")
        if value.startswith("/") or "\\" in value or ".." in value.split("/"):
            raise ValueError("must be a path relative to the tenant's artifact folder, without '..'")
        return value

    @field_validator("s3_endpoint")
    @classmethod
    def _endpoint_url(cls, value: str | None) -> str | None:
        if value is None:
            return None
        parts = urllib.parse.urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host, e.g. https://s3.example.com")
        if parts.username or parts.password or parts.query or parts.fragment:
            raise ValueError("must not carry credentials, a query or a fragment (the key pair has its own fields)")
        return value.rstrip("/")

    @model_validator(mode="after")
    def _s3_key_pair(self) -> DbtConfig:
        # No key pair is never "the worker's own identity": a tenant may not borrow the worker's AWS credentials.
        if self.on_s3 and (self.s3_access_key_id is None or self.s3_secret_access_key is None):
            missing = "s3_access_key_id" if self.s3_access_key_id is None else "s3_secret_access_key"
            raise ValueError(f"{missing} is required when an artifact is an s3:// object")
        return self

    @property
    def on_s3(self) -> bool:
        return any(v is not None and s3_location(v) is not None for v in (self.manifest, self.catalog))
