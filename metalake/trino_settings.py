"""How metalake's processes reach Trino (``METALAKE_TRINO__*``), and what the stack renders into its configuration."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, Field, SecretStr


class TrinoResourceGroupSettings(BaseModel):
    """Trino's resource groups for tenants' queries (the local stack renders them: ops/stack/resource_groups.py): each
    tenant (all its users together) runs at most ``tenant_max_running`` queries and queues ``tenant_max_queued`` more
    (then Trino refuses: QUERY_QUEUE_FULL); all tenants together ``tenants_*``. ``query_max_execution_s`` is Trino's
    ``query.max-execution-time``: no tenant query runs longer (tenants' users may not raise it; the service users
    may, per session)."""

    tenant_max_running: int = Field(default=2, gt=0)
    tenant_max_queued: int = Field(default=10, ge=0)
    tenant_memory_percent: int = Field(default=25, gt=0, le=100)
    tenants_max_running: int = Field(default=12, gt=0)
    tenants_max_queued: int = Field(default=200, ge=0)
    tenants_memory_percent: int = Field(default=70, gt=0, le=100)
    query_max_execution_s: int = Field(default=600, gt=0)


class TrinoJwtSettings(BaseModel):
    """Trino's JWT authenticator (people and tenants' tools; docs/serving.md). Unset values follow ``api.``: the
    JWKS of the API's issuer (``<api issuer>/.well-known/jwks.json``, or the external issuer's ``jwks_url``), its
    issuer and its audience. ``user_claim`` names the claim that holds the Trino user: metalake's own tokens of a
    tenant client carry ``trino_user`` (``tenant.<id>``, or ``tenant.<id>.pii`` with the ``pii:read`` scope); an
    external issuer's claims are not metalake's to keep consistent: with ``user_from`` ``auto`` (the default) Trino
    then takes the user from the issuer's tenant claim (``api.tenant_claim``), as ``tenant.<id>``, so a token's Trino
    user can never name another tenant than its tenant claim (no ``.pii`` or ``.admin`` user through such tokens);
    ``user_claim`` trusts the issuer to put the same tenant in both (``user_mapping_pattern`` optionally takes the user
    out of the claim, a regex with one group)."""

    enabled: bool = True
    jwks_url: str | None = None
    issuer: str | None = None
    audience: str | None = None
    user_claim: str = Field(default="trino_user", min_length=1)
    user_mapping_pattern: str | None = None
    user_from: Literal["auto", "user_claim", "tenant_claim"] = "auto"


class TrinoSettings(BaseModel):
    """The Trino coordinator and how metalake's processes connect to it (docs/serving.md, docs/configuration.md).

    ``https`` on: clients speak TLS, verify the server against ``ca_file`` (unset: the system's trust store) and
    authenticate: the platform's service users (``user`` and ``access.service_users``) with the password
    ``passwords[<user>]`` (Trino's password file); tenants' queries run as the platform user impersonating the
    tenant's Trino user. ``https`` off is the plain, unauthenticated protocol (a benchmark's reference only).
    ``shared_secret`` is Trino's ``internal-communication.shared-secret`` (read by the stack that renders Trino's
    configuration, never by a client)."""

    host: str | None = None
    port: int | None = None
    user: str = "metalake"
    catalog: str = "lake"
    https: bool = True
    ca_file: Path | None = None
    passwords: dict[str, SecretStr] = Field(default_factory=dict)
    shared_secret: SecretStr | None = None
    jwt: TrinoJwtSettings = Field(default_factory=TrinoJwtSettings)
    resource_groups: TrinoResourceGroupSettings = Field(default_factory=TrinoResourceGroupSettings)

    @property
    def http_scheme(self) -> str:
        return "https" if self.https else "http"

    @property
    def base_url(self) -> str:
        return f"{self.http_scheme}://{self.host}:{self.port}"
