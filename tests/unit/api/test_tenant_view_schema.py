"""A tenant learns its Trino schema from the API (issue 21 item 21): the name is keyed, so it cannot be derived from
the id, and the view answers exactly the name the provisioning created."""

from __future__ import annotations

from datetime import UTC, datetime
from types import SimpleNamespace
from typing import Any

from api.routes.tenants import _view
from ops.settings import Settings
from tenants.model import Tier
from tenants.registry import TenantRecord, TenantState
from tenants.trino_schemas import trino_schema


def test_the_tenant_view_names_the_keyed_trino_schema() -> None:
    settings = Settings.model_validate({"api": {"key_encryption_key": "a-key-encryption-key-of-32-bytes"}})
    at = datetime(2026, 11, 29, tzinfo=UTC)
    record = TenantRecord("acme-corp", Tier.POOLED, TenantState.ACTIVE, None, at, at)
    ctx: Any = SimpleNamespace(settings=settings)
    view = _view(ctx, record)
    assert view.trino_schema == trino_schema(settings, "acme-corp")
    assert view.trino_schema.startswith("acme_corp_") and view.trino_schema != "acme_corp"
