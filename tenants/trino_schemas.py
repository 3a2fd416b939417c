"""A tenant's Trino schema name: the one place it is made, and read back.

Trino resolves a table before it asks the access control, so a tenant's JWT used in a Trino client can tell an
existing schema (``PERMISSION_DENIED``) from a missing one (``SCHEMA_NOT_FOUND``): if schema names followed from
tenant ids, any tenant could test which ids exist (issue 21, item 21). So a schema is named
``<tenant id, '-' as '_'>_<suffix>``, the suffix the first :data:`SUFFIX_LENGTH` base32 characters of
HMAC-SHA256(key, tenant id): stable, derivable by every process that has the deployment's key, not guessable without
it. :meth:`SchemaNamer.tenant` maps a name back by recomputing the suffix (a constant-time comparison), with no table.

The key is derived (HKDF, its own ``info``) from ``secrets.schema_key`` if set, else from the platform's
key-encryption key (``secrets.key_encryption_key``, else ``api.key_encryption_key``: the erased-URN hash's source,
``control.erased``). Rotating that KEK therefore renames every schema unless ``secrets.schema_key`` keeps the old
value; ``metalake tenants migrate-schemas`` moves schemas to their current names (docs/tenants.md). A process with
no key at all (a development setup, which cannot issue tenant tokens with the built-in issuer) names schemas after
the id alone, as before: :attr:`SchemaNamer.keyed` says which.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
from dataclasses import dataclass, field
from functools import lru_cache

from pydantic import SecretStr

from metalake.sealing import Kek
from metalake.settings import KernelSettings
from metalake.tenancy import validate_tenant_id
from tenants.naming import TRINO_POOLED_SCHEMA

SCHEMA_NAME_INFO = b"metalake trino schema name v1"
# 12 base32 characters: 60 bits, far beyond what guessing through Trino's error codes can try.
SUFFIX_LENGTH = 12
_BASE32 = re.compile(r"[a-z2-7]+")
# Trino's own schemas and the shared tables': never a tenant's, whatever the id rules allow.
_NOT_TENANT_SCHEMAS = frozenset({"information_schema", "default", TRINO_POOLED_SCHEMA})


def _plain(tenant_id: str) -> str:
    return tenant_id.replace("-", "_")


@dataclass(frozen=True)
class SchemaNamer:
    """Names tenants' Trino schemas under ``key`` (None: the id alone, a process with no key configured). The key
    stays out of ``repr``: a namer in a log line shows no secret."""

    key: bytes | None = field(default=None, repr=False)

    @property
    def keyed(self) -> bool:
        return self.key is not None

    @staticmethod
    def _suffix(key: bytes, tenant_id: str) -> str:
        mac = hmac.new(key, tenant_id.encode(), hashlib.sha256).digest()
        return base64.b32encode(mac).decode().lower()[:SUFFIX_LENGTH]

    def schema(self, tenant_id: str) -> str:
        """The tenant's Trino schema (validated id; lowercase letters, digits and '_', as Trino keeps them)."""
        plain = _plain(validate_tenant_id(tenant_id))
        return plain if self.key is None else f"{plain}_{self._suffix(self.key, tenant_id)}"

    def tenant(self, schema: str) -> str | None:
        """The tenant whose schema this is, or None (another schema, or a suffix that is not the tenant's)."""
        if self.key is None:
            return self.legacy_tenant(schema)
        prefix, _, suffix = schema.rpartition("_")
        tenant = self.legacy_tenant(prefix) if len(suffix) == SUFFIX_LENGTH else None
        if tenant is None or not hmac.compare_digest(suffix.encode(), self._suffix(self.key, tenant).encode()):
            return None
        return tenant

    @staticmethod
    def looks_keyed(schema: str) -> bool:
        """Whether ``schema`` has the shape of a keyed name (under any key): ``<id>_<SUFFIX_LENGTH base32>``."""
        prefix, _, suffix = schema.rpartition("_")
        return len(suffix) == SUFFIX_LENGTH and _BASE32.fullmatch(suffix) is not None and bool(prefix)

    @staticmethod
    def legacy_tenant(schema: str) -> str | None:
        """The tenant a schema named after the id alone (before keyed names) belongs to, or None (Trino's own
        schemas, the shared tables')."""
        if "-" in schema or schema in _NOT_TENANT_SCHEMAS:
            return None
        try:
            return validate_tenant_id(schema.replace("_", "-"))
        except ValueError:
            return None


# No key: the id alone.
UNKEYED = SchemaNamer()


def schema_namer(settings: KernelSettings) -> SchemaNamer:
    """The process's namer: its key from ``secrets.schema_key``, else the current key-encryption key."""
    material = settings.secrets.schema_key or settings.secrets.key_encryption_key or settings.api.key_encryption_key
    return UNKEYED if material is None else namer_for(material)


def namer_for(material: SecretStr) -> SchemaNamer:
    """The namer under one configured key (the schema key, or a key-encryption key)."""
    return _namer(material.get_secret_value())


@lru_cache(maxsize=4)
def _namer(material: str) -> SchemaNamer:
    return SchemaNamer(Kek.of(SecretStr(material), "secrets.schema_key").derived(SCHEMA_NAME_INFO))


def trino_schema(settings: KernelSettings, tenant_id: str) -> str:
    """The tenant's Trino schema in this deployment (:meth:`SchemaNamer.schema` under the configured key)."""
    return schema_namer(settings).schema(tenant_id)
