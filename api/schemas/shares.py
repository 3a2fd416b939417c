"""Share link bodies: the saved query with its expiry and row limit, and the link (its id shown once)."""

from __future__ import annotations

from datetime import datetime

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


class ShareCreated(BaseModel):
    id: str = Field(description="The link's token: shown once, never stored (only its hash is).")
    expires_at: datetime
    csv_url: str = Field(examples=["/share/3q2-Vb.../data.csv"])
    json_url: str = Field(examples=["/share/3q2-Vb.../data.json"])
