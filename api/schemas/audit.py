"""Audit trail bodies: one row of a trail (the target only as its hash) and a page of them."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field


class AuditEntry(BaseModel):
    at: datetime
    actor: str = Field(description="The client id (token subject) that acted.", examples=["mlc_3f2a9c0d1e4b"])
    action: str = Field(examples=["tenant.suspend"])
    target_hash: str = Field(description="sha256 of the target (a tenant id, a connector name, a URN...).")
    result: str = Field(description="accepted, done, refused or failed.", examples=["done"])
    counts: dict[str, int] = Field(default_factory=dict, examples=[{"delta.assets": 1}])


class AuditPage(BaseModel):
    items: list[AuditEntry]
    next_cursor: str | None = None
