"""Ingest write key bodies: the creation request (its grant), the key as listed (id, age, grant) and the new key,
shown in its creation answer only."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

_PII = (
    "The PII grant: the key may take PII tags (`access.pii_tags`) off assets and stop them spreading, which unmasks "
    "columns for SQL readers without `pii:read`. Without it such events are refused (403 `pii-grant-required`)."
)


class WriteKeyCreate(BaseModel):
    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": {"pii": False}})

    pii: bool = Field(default=False, description=_PII + " Set at creation only.")


class WriteKeyInfo(BaseModel):
    key_id: str
    created_at: datetime
    pii: bool = Field(default=False, description=_PII)


class WriteKeyCreated(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "tenant": "acme",
                "key_id": "3f2a9c0d1b7e4a65",
                "key": "mlk_3f2a9c0d1b7e4a65_...",
                "created_at": "2026-11-22T03:00:00Z",
                "pii": False,
            }
        }
    )

    tenant: str
    key_id: str
    key: str = Field(description="The write key, in this answer only: send it as `Authorization: Bearer <key>`.")
    created_at: datetime
    pii: bool = Field(default=False, description=_PII)


class WriteKeysView(BaseModel):
    items: list[WriteKeyInfo] = Field(description="The tenant's keys that are not revoked, oldest first; ids only.")
