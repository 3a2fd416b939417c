"""Tenant bodies: create and update requests, the tenant with its provisioning progress, and a page of tenants."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field, field_validator

from metalake.tenancy import TENANT_ID_PATTERN
from tenants.model import Tier
from tenants.registry import TenantState

MAX_SETTINGS_BYTES = 16 * 1024
_SETTINGS_KEY = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,63}")


def _check_settings(value: dict[str, Any]) -> dict[str, Any]:
    """A JSON object of at most 16 KiB whose keys (at every depth) MongoDB stores as they are."""

    def walk(node: Any) -> None:  # noqa: ANN401
        if isinstance(node, dict):
            for key, child in node.items():
                if not _SETTINGS_KEY.fullmatch(key):
                    raise ValueError("keys are letters, digits, '_' or '-', a letter first, at most 64 characters")
                walk(child)
        elif isinstance(node, list):
            for child in node:
                walk(child)

    walk(value)
    if len(json.dumps(value)) > MAX_SETTINGS_BYTES:
        raise ValueError(f"at most {MAX_SETTINGS_BYTES} bytes of JSON")
    return value


class TenantCreate(BaseModel):
    id: str = Field(
        pattern=f"^{TENANT_ID_PATTERN.pattern}$",
        description="3-40 characters: a lowercase letter, then lowercase letters, digits or '-'. Never changes.",
        examples=["acme"],
    )
    tier: Tier = Field(
        default=Tier.POOLED,
        description="pooled: shared topics and streaming query; dedicated: its own topics and streaming query.",
    )
    display_name: str | None = Field(default=None, min_length=1, max_length=200, examples=["Acme Corp"])
    settings: dict[str, Any] = Field(
        default_factory=dict,
        description="Free-form tenant settings (JSON object, 16 KiB).",
        examples=[{"region": "eu"}],
    )

    _settings_ok = field_validator("settings")(_check_settings)


class TenantUpdate(BaseModel):
    display_name: str | None = Field(default=None, min_length=1, max_length=200, examples=["Acme Corporation"])
    settings: dict[str, Any] | None = Field(
        default=None, description="Replaces the settings object as a whole.", examples=[{"region": "eu"}]
    )
    tier: Tier | None = Field(
        default=None, description="Accepted only if unchanged: changing a tier would move live data (409)."
    )

    @field_validator("settings")
    @classmethod
    def _settings_ok(cls, value: dict[str, Any] | None) -> dict[str, Any] | None:
        return None if value is None else _check_settings(value)


class Provisioning(BaseModel):
    done: list[str] = Field(description="Steps recorded as done.", examples=[["topics", "lake"]])
    pending: list[str] = Field(description="Steps still to run, in order.", examples=[["trino", "mongo"]])


class TenantView(BaseModel):
    id: str = Field(examples=["acme"])
    tier: Tier
    state: TenantState = Field(description="provisioning, active, suspended or deleting.")
    display_name: str | None = Field(default=None, examples=["Acme Corp"])
    settings: dict[str, Any] = Field(default_factory=dict)
    created_at: datetime
    updated_at: datetime
    provisioning: Provisioning
    trino_schema: str = Field(
        description="The tenant's schema in Trino's catalog `lake` (its default schema in the SQL endpoint): the id, "
        "then a suffix keyed by the deployment, so other tenants cannot guess it. Connect BI tools to it.",
        examples=["acme_k3zq7m2xw4ab"],
    )
    error: str | None = Field(default=None, description="Why the last (de)provisioning run stopped, if it failed.")
    queued_at: datetime | None = Field(
        default=None,
        description="When (de)provisioning work was queued for the lake worker; null once it is done. Poll this "
        "resource until it is null and `state` is `active` (or until the tenant is gone after a delete), or until "
        "`error` says why the run stopped (`POST .../provision` queues it again).",
    )


class TenantPage(BaseModel):
    items: list[TenantView]
    next_cursor: str | None = None
