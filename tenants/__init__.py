"""Tenants: the tenant model and the one module (``tenants.naming``) that derives every physical name."""

from tenants.model import Tenant, Tier
from tenants.naming import (
    CHANGES_TOPIC,
    InvalidTenantId,
    TenantNames,
    names_for,
    validate_tenant_id,
)

__all__ = [
    "CHANGES_TOPIC",
    "InvalidTenantId",
    "Tenant",
    "TenantNames",
    "Tier",
    "names_for",
    "validate_tenant_id",
]
