"""Share link bodies: the saved query with its expiry and row limit, the link (its id shown once), and the links as
the list and revoke routes show them (by reference, never by id)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, Field

from api.schemas.sql import MAX_SQL_CHARS


class ShareCreate(BaseModel):
    sql: str = Field(
        min_length=1,
        max_length=MAX_SQL_CHARS,
        description="The query the link runs each time it is read (as the tenant, PII masked).",
        examples=["SELECT kind, count(*) AS n FROM assets GROUP BY kind"],
    )
    expires_in_s: int | None = Field(
        default=None,
        gt=0,
        description="Seconds until the link stops working (default settings.sql.share_default_ttl_s, at most "
        "settings.sql.share_max_ttl_s).",
        examples=[86400],
    )
    max_rows: int | None = Field(
        default=None, gt=0, description="Row limit of each read (at most settings.sql.max_rows).", examples=[1000]
    )


REF_DESCRIPTION = "The link's reference: the sha256 (hex) of its id. It opens nothing; list and revoke use it."


class ShareCreated(BaseModel):
    id: str = Field(description="The link's token: shown once, never stored (only its hash is).")
    ref: str = Field(description=REF_DESCRIPTION, pattern="^[0-9a-f]{64}$")
    expires_at: datetime
    csv_url: str = Field(examples=["/share/3q2-Vb.../data.csv"])
    json_url: str = Field(examples=["/share/3q2-Vb.../data.json"])


ShareState = Literal["active", "expired", "revoked", "creator-revoked"]


class ShareView(BaseModel):
    """A link as the tenant's admins and readers see it; ``sql`` only for ``tenant:admin``."""

    ref: str = Field(description=REF_DESCRIPTION)
    state: ShareState = Field(
        description="active; expired; revoked (DELETE); creator-revoked (the API client that made it is revoked or "
        "gone): only active links can be read."
    )
    created_by: str = Field(description="The client id that made the link.")
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None
    revoked_by: str | None = None
    max_rows: int | None = None
    sql: str | None = Field(default=None, description="The saved query: shown to tenant:admin only.")


class SharePage(BaseModel):
    items: list[ShareView]
    next_cursor: str | None = None
