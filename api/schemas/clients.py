"""API client bodies: create and rotate requests, the client as listed, and the client with its one-time secret."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from control.auth.clients import Role


class ClientCreate(BaseModel):
    name: str = Field(min_length=1, max_length=100, description="What the client is for.", examples=["dashboards"])
    role: Role = Field(
        description="read-only (tenant:read sql:read), read-write (+ events:write) or admin (+ tenant:admin).",
        examples=["read-only"],
    )
    pii: bool = Field(
        default=False,
        description="Also grant pii:read: SQL through the API then reads PII-tagged columns in clear.",
        examples=[False],
    )


class ClientRotate(BaseModel):
    overlap_seconds: int | None = Field(
        default=None,
        ge=0,
        le=30 * 86_400,
        description="How long the previous secret stays valid (default: settings.api.secret_overlap_s; 0 revokes "
        "it at once).",
        examples=[3600],
    )


class ClientView(BaseModel):
    client_id: str = Field(examples=["mlc_3f2a9c0d1e4b5a6978877665"])
    tenant: str | None = Field(examples=["acme"])
    name: str = Field(examples=["dashboards"])
    role: Role
    scopes: list[str] = Field(examples=[["tenant:read", "sql:read"]])
    state: str = Field(description="active or revoked", examples=["active"])
    created_at: datetime
    updated_at: datetime
    revoked_at: datetime | None = None
    secrets_valid: int = Field(description="How many secrets currently authenticate (2 during a rotation overlap).")
    previous_secret_expires_at: datetime | None = Field(
        default=None, description="When the previous secret stops working, during a rotation overlap."
    )


class ClientWithSecret(ClientView):
    client_secret: str = Field(description="Shown once: store it now; it cannot be read again.")


class ClientPage(BaseModel):
    items: list[ClientView]
    next_cursor: str | None = None
