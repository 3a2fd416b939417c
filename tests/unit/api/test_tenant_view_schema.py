"""A tenant learns its Trino schema from the API (issue 21 item 21): the name is keyed, so it cannot be derived from
the id, and the view answers exactly the name the provisioning created."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.services.provisioning.provisioner import Provisioner
from api.services.provisioning.steps import StepContext

from api.routes.tenants import _view
from ops.settings import Settings
from tenants.model import Tier
from tenants.registry import TenantRecord, TenantState
from tenants.trino_schemas import trino_schema


def test_the_tenant_view_names_the_keyed_trino_schema() -> None:
    settings = Settings.model_validate({"api": {"key_encryption_key": "a-key-encryption-key-of-32-bytes"}})
    at = datetime(2026, 11, 29, tzinfo=UTC)
    record = TenantRecord("acme-corp", Tier.POOLED, TenantState.ACTIVE, None, at, at)
    unused: Any = None
    view = _view(record, Provisioner(unused, StepContext(settings, unused, unused)))
    assert view.trino_schema == trino_schema(settings, "acme-corp")
    assert view.trino_schema.startswith("acme_corp_") and view.trino_schema != "acme_corp"
