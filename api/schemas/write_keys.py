"""Ingest write key bodies: the key as listed (id and age) and the new key, shown in its creation answer only."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field


class WriteKeyInfo(BaseModel):
    key_id: str
    created_at: datetime


class WriteKeyCreated(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "tenant": "acme",
                "key_id": "3f2a9c0d1b7e4a65",
                "key": "mlk_3f2a9c0d1b7e4a65_...",
                "created_at": "2026-11-22T03:00:00Z",
            }
        }
    )

    tenant: str
    key_id: str
    key: str = Field(description="The write key, in this answer only: send it as `Authorization: Bearer <key>`.")
    created_at: datetime


class WriteKeysView(BaseModel):
    items: list[WriteKeyInfo] = Field(description="The tenant's keys that are not revoked, oldest first; ids only.")
