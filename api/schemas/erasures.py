"""Erasure bodies: the request (the URN, kept only until the erasure finishes) and the erasure's status."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from api.services.erasures import ErasureState


class ErasureRequest(BaseModel):
    urn: str = Field(
        min_length=1,
        max_length=2000,
        description="The asset's URN, any spelling. Every row about it leaves Delta (files vacuumed) and MongoDB.",
        examples=["urn:metalake:postgres:prod/shop/public/customers/email"],
    )
    include_children: bool = Field(default=False, description="Also erase the assets under it (a table's columns).")


class ErasureView(BaseModel):
    id: str = Field(examples=["era_5c2f0e9a4b7d1e3f6a8b9c0d"])
    tenant: str = Field(examples=["acme"])
    target_hash: str = Field(
        description="HMAC-SHA256 of the URN under a key derived from the platform's key-encryption key (the URN "
        "itself is not kept; erasures from before hold its plain sha256)."
    )
    include_children: bool
    state: ErasureState = Field(description="accepted, running, done or failed.")
    requested_by: str
    created_at: datetime
    updated_at: datetime
    counts: dict[str, int] = Field(
        default_factory=dict, description="Rows removed per Delta table and documents per collection (when done)."
    )
    error: str | None = None
    action_required: str | None = Field(
        default=None,
        description="Set on a done erasure when an operator must still act: e.g. Kafka did not confirm the erase's "
        "announcement, so the propagation processor must be restarted to forget the asset.",
    )
