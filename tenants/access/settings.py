"""The Trino access rules' section (``METALAKE_ACCESS__*``), read wherever PII tags and service users matter."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr

from metalake.settings import KernelSettings, required


class DecisionSettings(BaseModel):
    """The lake decision endpoint (``access.mode = "opa"``): where the access processor serves it, the address Trino
    calls (``url``, default ``http://<host>:<port>``), the key in its path, and how long a tenant's state and masks
    are cached (a suspension or a new mask reaches Trino within that)."""

    host: str = "127.0.0.1"
    port: int = Field(default=9106, ge=0, le=65535)
    url: str | None = None
    key: SecretStr | None = None
    cache_ttl_s: float = Field(default=1.0, ge=0)

    @property
    def base_url(self) -> str:
        return (self.url or f"http://{self.host}:{self.port}").rstrip("/")


class AccessSettings(BaseModel):
    """Trino access rules generated from the control plane (``metalake access run|sync``; docs/serving.md).

    ``rules_file`` is the file Trino's file-based access control reloads (required by the access processor; the local
    stack sets its Trino's).
    ``service_users`` keep full access besides ``trino.user``. ``pii_tags`` are fnmatch patterns of the tags whose
    columns are masked for a tenant's users without the PII role. A column of a table in the tenant's Trino schema
    has the URN ``urn:metalake:trino:<trino_instance>/<catalog>/<schema>/<table>/<column>``.
    ``protective_tags`` are fnmatch patterns of tags that filter rows in customers' engines (consent columns,
    docs/enforcement.md): taking one off or stopping it spreading needs the PII grant, as for ``pii_tags``; each
    registered engine's ``consent_tag`` counts too (control/auth/protective.py).
    """

    rules_file: Path | None = None
    # "rules": every tenant's rules in the rules file; "opa": a rules file that names no tenant, and the tenant checks
    # and masks as OPA decisions served by the access processor (docs/serving.md, "The rules").
    mode: Literal["rules", "opa"] = "rules"
    decisions: DecisionSettings = DecisionSettings()
    service_users: list[str] = Field(default_factory=lambda: ["metalake-tests", "bench"])
    pii_tags: list[str] = Field(default_factory=lambda: ["PII", "PII.*", "GDPR", "GDPR.*"])
    protective_tags: list[str] = Field(default_factory=lambda: ["consent"])
    mask_style: Literal["null", "redact", "hash"] = "redact"
    trino_instance: str = "metalake"
    group_id: str = "metalake-access"
    resync_interval_s: float = Field(default=300.0, gt=0)


class AccessRulesSettings(KernelSettings):
    """What rendering a tenant's access rules reads (``tenants.access.sync``): the kernel's and ``access``."""

    access: AccessSettings = AccessSettings()

    @property
    def access_rules_file(self) -> Path:
        """The Trino access rules file Trino reloads (``access.rules_file``)."""
        return required(self.access.rules_file, "access.rules_file")

    @property
    def decisions_key(self) -> SecretStr:
        """The key in the lake decision endpoint's path (``access.decisions.key``), required in ``opa`` mode."""
        return required(self.access.decisions.key, "access.decisions.key")
