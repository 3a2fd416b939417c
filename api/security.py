"""A request's tenant once the caller was checked against it. The principal and the scopes are the control plane's
(:mod:`control.auth.principal`); routes depend on ``api.auth.deps.current_principal`` (overridable in tests),
``require(*scopes)`` and ``require_tenant(*scopes)``.
"""

from __future__ import annotations

from dataclasses import dataclass

from control.auth.principal import Principal


@dataclass(frozen=True)
class TenantContext:
    """A request's tenant, after the one check that the principal may see it (another tenant answers 404)."""

    tenant: str
    principal: Principal
