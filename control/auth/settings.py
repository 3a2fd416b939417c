"""The admin API's section (``METALAKE_API__*``: its authorization server, token validation, limits) and the
enforcement endpoint's (``METALAKE_ENFORCEMENT__*``), read by the control plane's token checks and by the API."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field, ValidationInfo, field_validator

from metalake.settings import ApiKeySettings
from tenants.access.settings import AccessRulesSettings


class IssuerProfile(BaseModel):
    """What an external issuer's access tokens look like, where they differ from RFC 9068 (``api.issuer_profiles``).

    The defaults are RFC 9068's: ``typ`` is ``at+jwt`` (or ``application/at+jwt``) and the scopes are the
    space-separated string ``scope``. Okta and Keycloak send ``typ: JWT`` (or none) and a ``scp`` array: say so for
    that issuer alone.
    """

    # Accepted header ``typ`` values (compared without case); ``allow_missing_typ`` accepts a header without one.
    token_types: list[str] = Field(default_factory=lambda: ["at+jwt", "application/at+jwt"], min_length=1)
    allow_missing_typ: bool = False
    # The claim holding the scopes and its shape: a space-separated string, a JSON array of strings, or either.
    scope_claim: str = Field(default="scope", min_length=1)
    scope_format: Literal["string", "list", "string_or_list"] = "string"


class TenantQuotas(BaseModel):
    """How many live objects of each kind one tenant may hold (``api/quotas.py``; 409 ``quota-exceeded`` beyond):
    active API clients, write keys not revoked, connectors, subscriptions, share links not yet pruned. The query
    engines' cap is ``enforcement.max_engines_per_tenant``."""

    clients: int = Field(default=50, gt=0)
    write_keys: int = Field(default=50, gt=0)
    connectors: int = Field(default=100, gt=0)
    subscriptions: int = Field(default=100, gt=0)
    share_links: int = Field(default=1000, gt=0)


class ApiSettings(ApiKeySettings):
    """The admin API (``metalake api``): its OAuth 2 authorization server, token validation and rate limits.

    ``issuer`` defaults to ``http://<host>:<port>``. ``key_encryption_key`` seals the private signing keys stored in
    the control plane; without it the API validates tokens but cannot issue any. ``external_issuer`` makes an external
    OIDC provider the only trusted issuer (its JWKS comes from its discovery document). See docs/api.md.
    """

    host: str = "127.0.0.1"
    port: int = Field(default=8000, gt=0, lt=65536)
    issuer: str | None = None
    audience: str = "metalake-api"
    token_lifetime_s: int = Field(default=900, gt=0, le=86_400)
    # How long POST .../subscriptions/{name}/test waits for the outbound runtime's outcome before answering 202.
    subscription_test_wait_s: float = Field(default=5.0, ge=0, le=30)
    signing_alg: Literal["RS256", "ES256"] = "RS256"
    external_issuer: str | None = None
    # Per external issuer (its exact ``iss``): the token shape it sends, if not RFC 9068's. Never for the built-in one.
    issuer_profiles: dict[str, IssuerProfile] = Field(default_factory=dict)
    tenant_claim: str = "tenant"
    leeway_s: int = Field(default=30, ge=0, le=300)
    jwks_min_refresh_s: float = Field(default=1.0, ge=0)
    jwks_max_age_s: float = Field(default=300.0, gt=0)
    client_cache_ttl_s: float = Field(default=10.0, ge=0)
    secret_overlap_s: int = Field(default=86_400, ge=0, le=30 * 86_400)
    rate_limit_per_s: float = Field(default=20.0, gt=0)
    rate_limit_burst: int = Field(default=100, gt=0)
    # Every request of one tenant's clients together, besides each client's own bucket: creating clients does not
    # multiply what a tenant may take from a process.
    tenant_rate_limit_per_s: float = Field(default=50.0, gt=0)
    tenant_rate_limit_burst: int = Field(default=200, gt=0)
    quotas: TenantQuotas = Field(default_factory=TenantQuotas)
    # Audit rows are committed per table in one Delta commit every audit_flush_s (0: each row before its response),
    # or at once when audit_batch_rows wait; past audit_buffer_max waiting, requests commit their own row.
    audit_flush_s: float = Field(default=0.5, ge=0, le=60)
    audit_batch_rows: int = Field(default=500, gt=0)
    audit_buffer_max: int = Field(default=10_000, gt=0)
    # POST /oauth/token per peer address, before any secret check: bounds a flood of made-up client ids from one host.
    token_peer_rate_per_s: float = Field(default=10.0, gt=0)
    token_peer_burst: int = Field(default=50, gt=0)
    # POST /oauth/token failures (unknown client, wrong secret) per (claimed client id, peer address): a client is never
    # locked out by wrong secrets sent for its id from another address.
    token_failure_rate_per_s: float = Field(default=1.0, gt=0)
    token_failure_burst: int = Field(default=10, gt=0)
    # Heavy work (dead-letter listings, audit reads, Snowflake scripts, connector offsets, propagation dry runs) runs on
    # a pool per kind, never on the pool every route shares: this many threads each, at most work_per_tenant requests
    # of one tenant at once (429 beyond, 503 when the kind's pool is full; api/workpool.py).
    work_workers: int = Field(default=4, gt=0, le=100)
    work_per_tenant: int = Field(default=2, gt=0)
    # Token checks run on their own threads; this many more wait for one, beyond that 503 at once.
    token_check_workers: int = Field(default=8, gt=0, le=200)
    token_check_queue: int = Field(default=256, ge=0)
    # POST /oauth/token's secret checks (scrypt, 16 MiB and ~60 ms each) run on this many threads of their own; this
    # many more wait for one, beyond that 503 at once: a token flood from many addresses holds neither the pool
    # every route shares nor more than workers x 16 MiB.
    token_secret_workers: int = Field(default=4, gt=0, le=64)
    token_secret_queue: int = Field(default=64, ge=0)
    # Every request body, read or not by its route, stops here (413); routes may take less (the token form: 8 KiB).
    max_body_bytes: int = Field(default=1024 * 1024, gt=0)
    # The API's own background sweep (the tag documents' urn_keys backfill, api.services.resume): at startup and every
    # resume_interval_s. Tenant (de)provisioning and erasures are queued for the lake worker, which runs them.
    resume: bool = True
    resume_interval_s: float = Field(default=60.0, gt=0)
    # A person's edits of an asset (PATCH /v1/tenants/{tenant}/assets, docs/edits.md): the longest description, the
    # most owners, the longest owner, the most edited properties one asset holds and the longest property value.
    # The event schemas' own bounds (65536, 100, 320, 8192) are the ceilings.
    edit_description_max: int = Field(default=16_384, gt=0, le=65_536)
    edit_owners_max: int = Field(default=50, gt=0, le=100)
    edit_owner_max: int = Field(default=320, gt=0, le=320)
    edit_properties_max: int = Field(default=50, gt=0, le=200)
    edit_property_value_max: int = Field(default=2048, gt=0, le=8192)

    @property
    def issuer_url(self) -> str:
        return self.issuer or f"http://{self.host}:{self.port}"

    @field_validator("issuer_profiles")
    @classmethod
    def _profiles_for_the_external_issuer_only(
        cls, profiles: dict[str, IssuerProfile], info: ValidationInfo
    ) -> dict[str, IssuerProfile]:
        # Our own tokens are RFC 9068's: a profile must not loosen the checks of the issuer this API runs itself.
        # A field validator, so an error quotes only this field (never the key encryption key beside it).
        strays = sorted(set(profiles) - {info.data.get("external_issuer")})
        if strays:
            raise ValueError(f"issuer_profiles names issuers that are not the external issuer: {', '.join(strays)}")
        return profiles


class EnforcementSettings(BaseModel):
    """PII enforced in customers' own query engines (docs/enforcement.md): the OPA decision endpoint of the admin API.

    A decision reads the tenant's tags of the table asked about at most once per ``cache_ttl_s`` (Trino asks several
    times per query), so a tag change is enforced within that delay; checked engine keys are kept as long (a deleted
    engine is refused within it). ``max_cached_tables`` bounds the cache; ``max_engines_per_tenant`` the
    registrations; ``max_catalogs`` the catalogs and ``max_principals`` the PII users and groups (and impersonators,
    operators) of one engine. A decision request names at most ``max_batch_resources`` resources and (column masks)
    ``max_tables_per_request`` tables. A key the API has not recently found valid costs its peer address one token
    of ``peer_rate_per_s``/``peer_burst`` before it is checked (429 beyond): a real engine's cached key is free.
    """

    cache_ttl_s: float = Field(default=1.0, ge=0, le=300)
    max_cached_tables: int = Field(default=10_000, gt=0)
    max_engines_per_tenant: int = Field(default=20, gt=0)
    max_catalogs: int = Field(default=50, gt=0)
    max_principals: int = Field(default=500, gt=0)
    max_batch_resources: int = Field(default=10_000, gt=0)
    max_tables_per_request: int = Field(default=8, gt=0)
    peer_rate_per_s: float = Field(default=20.0, gt=0)
    peer_burst: int = Field(default=100, gt=0)


class AuthSettings(AccessRulesSettings):
    """What the control plane's token checks read (``control.auth.gate``): the API's section, and ``access`` for the
    PII grants."""

    api: ApiSettings = ApiSettings()
