"""The tenant as the platform sees it: an id, a tier, and an optional lake root of its own."""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path

from pydantic import BaseModel, ConfigDict, field_validator

from tenants.naming import validate_tenant_id


class Tier(StrEnum):
    """``pooled`` tenants share topics and the streaming query; ``dedicated`` ones get their own."""

    POOLED = "pooled"
    DEDICATED = "dedicated"


class Tenant(BaseModel):
    model_config = ConfigDict(frozen=True)

    id: str
    tier: Tier = Tier.POOLED
    lake_root: Path | None = None

    @field_validator("id")
    @classmethod
    def _valid_id(cls, value: str) -> str:
        return validate_tenant_id(value)
