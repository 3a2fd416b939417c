"""Generated Snowflake masking policies' section (``METALAKE_SNOWFLAKE__*``)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from tenants.access.settings import AccessRulesSettings


class SnowflakeMaskingSettings(BaseModel):
    """Generated Snowflake masking policies (``metalake masking snowflake-policies``, ``GET
    /v1/tenants/{tenant}/masking/snowflake``; docs/snowflake.md). Columns are those of ``snowflake`` URNs tagged with
    one of ``access.pii_tags``.

    ``pii_roles`` see PII in clear (``IS_ROLE_IN_SESSION``; spelled as Snowflake stores them, upper case unless
    created quoted); none: nobody does. ``mask_style`` is the masked text (``redact``: ``****``, ``hash``: SHA-256
    hex, ``null``); other types mask to NULL. ``policy_scope``: one policy per type in each schema, or in each
    database's ``policy_schema``. ``fold_lowercase``: an all-lower-case name valid unquoted is upper-cased (how
    Snowflake resolves a name a tool wrote unquoted). A request stops past ``max_columns`` tagged columns.
    """

    pii_roles: list[str] = Field(default_factory=list)
    mask_style: Literal["redact", "hash", "null"] = "redact"
    policy_scope: Literal["schema", "database"] = "schema"
    policy_schema: str = Field(default="METALAKE", pattern=r"^[^\x00-\x1f\x7f]{1,255}$")
    policy_prefix: str = Field(default="METALAKE_PII", pattern=r"^[A-Za-z_][A-Za-z0-9_$]{0,200}$")
    fold_lowercase: bool = True
    max_columns: int = Field(default=100_000, gt=0)


class MaskingSettings(AccessRulesSettings):
    """What a tenant's Snowflake script reads (``control.snowflake.policies``): ``snowflake`` and the PII tags."""

    snowflake: SnowflakeMaskingSettings = SnowflakeMaskingSettings()
