"""Subscription bodies: create and update requests (secrets write-only), the subscription as shown (secret field
names only), and a test send's answer and status."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, SecretStr

from control.subscriptions.filters import Filters
from control.subscriptions.store import NAME_PATTERN

_SLACK_EXAMPLE: dict[str, Any] = {
    "name": "pii-alerts",
    "destination": "slack",
    "config": {"channel": "C0123"},
    "secrets": {"token": "xoxb-…"},
    "filters": {"event_types": ["classification.*", "propagation.completed"], "tags": ["PII", "GDPR"]},
}


class SubscriptionCreate(BaseModel):
    """A destination and what it wants. ``config`` and ``secrets`` follow the destination type: slack
    (``channel``; secret ``token``), jira (``server``, ``email``, ``project``, ``issue_type``, ``tags``; secret
    ``api_token``), webhook (``url``; secrets ``key_id``, ``secret``)."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": _SLACK_EXAMPLE})

    name: str = Field(pattern=NAME_PATTERN.pattern)
    destination: str = Field(min_length=1, max_length=64)
    config: dict[str, Any] = Field(default_factory=dict)
    secrets: dict[str, SecretStr | None] = Field(default_factory=dict, description="Write-only.")
    filters: Filters = Field(default_factory=Filters)
    enabled: bool = True


class SubscriptionUpdate(BaseModel):
    """Fields left out keep their value. ``secrets`` are merged into the stored ones."""

    model_config = ConfigDict(extra="forbid", json_schema_extra={"example": {"enabled": False}})

    config: dict[str, Any] | None = None
    secrets: dict[str, SecretStr | None] | None = Field(default=None, description="Write-only.")
    filters: Filters | None = None
    enabled: bool | None = None


class SubscriptionView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "tenant": "acme",
                "name": "pii-alerts",
                "destination": "slack",
                "config": {"channel": "C0123"},
                "filters": {"event_types": ["classification.*"], "tags": ["PII"], "assets": [], "asset_tags": []},
                "enabled": True,
                "secret_fields": ["token"],
                "created_at": "2026-11-22T03:00:00Z",
                "updated_at": "2026-11-22T03:00:00Z",
            }
        }
    )

    tenant: str
    name: str
    destination: str
    config: dict[str, Any]
    filters: Filters
    enabled: bool
    secret_fields: list[str] = Field(description="Names of the stored secrets; values are never returned.")
    created_at: datetime | None = None
    updated_at: datetime | None = None


class TestSendView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={"example": {"status": "delivered", "detail": "slack", "refs": {"ts": "1700000001.000100"}}}
    )

    status: str = Field(description="delivered or skipped")
    detail: str
    refs: dict[str, str]


class TestStatusView(BaseModel):
    model_config = ConfigDict(
        json_schema_extra={
            "example": {
                "id": "0b6f1c1e-3f4a-4d2b-9a8e-5c7d6e5f4a3b",
                "subscription": "pii-alerts",
                "status": "delivered",
                "detail": "slack",
                "refs": {"channel": "C0123", "ts": "1700000001.000100"},
                "requested_at": "2026-11-22T03:00:00Z",
                "finished_at": "2026-11-22T03:00:01Z",
            }
        }
    )

    id: str
    subscription: str
    status: Literal["pending", "delivered", "skipped", "failed"]
    detail: str = Field(description="The destination's answer (never a secret); empty while pending.")
    refs: dict[str, str]
    requested_at: datetime | None = None
    finished_at: datetime | None = None
