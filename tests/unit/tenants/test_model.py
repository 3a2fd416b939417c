"""The tenant model validates its id with the naming rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from tenants.model import Tenant, Tier


def test_defaults() -> None:
    tenant = Tenant(id="acme")
    assert tenant.tier is Tier.POOLED
    assert tenant.lake_root is None


def test_tier_from_string() -> None:
    tenant = Tenant(id="acme", tier="dedicated", lake_root="/lakes/acme")  # type: ignore[arg-type]
    assert tenant.tier is Tier.DEDICATED
    assert tenant.lake_root == Path("/lakes/acme")


@pytest.mark.parametrize("tenant_id", ["ab", "Acme", "acme_corp", "1acme"])
def test_invalid_id(tenant_id: str) -> None:
    with pytest.raises(ValidationError, match="invalid tenant id"):
        Tenant(id=tenant_id)


def test_unknown_tier() -> None:
    with pytest.raises(ValidationError):
        Tenant(id="acme", tier="gold")  # type: ignore[arg-type]


def test_frozen() -> None:
    tenant = Tenant(id="acme")
    with pytest.raises(ValidationError):
        tenant.id = "other"
