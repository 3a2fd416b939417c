"""The route dependency aliases the route modules share: who may call (by scope), the auth runtime, and the store
of more than one resource (the connectors' control store: connectors and write keys).

Declare a handler parameter with one of these instead of ``Depends(require_tenant(...))``. Aliases of one resource
(its store, its path parameters, a scope combination only it accepts) stay in its route module. The request context
(``api.context.ContextDep``), the caller (``api.auth.deps.PrincipalDep``) and the event publisher
(``api.services.events.PublisherDep``) are defined beside their dependencies, which use them too.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import Depends

from api.auth.deps import auth_runtime, require, require_tenant
from api.auth.runtime import AuthRuntime
from api.context import ContextDep
from api.security import TenantContext
from control.auth.principal import Principal, Scope
from control.connectors.store import ControlStore
from metalake.sealing import sealer_for
from tenants.naming import CONTROL_DATABASE

# The tenant in the path, if the caller may read it (tenant:read or tenant:admin).
TenantReader = Annotated[TenantContext, Depends(require_tenant(Scope.TENANT_READ, Scope.TENANT_ADMIN))]
# The tenant in the path, if the caller administers it.
TenantAdmin = Annotated[TenantContext, Depends(require_tenant(Scope.TENANT_ADMIN))]
# The tenant in the path, if the caller may query its lake with SQL.
SqlReader = Annotated[TenantContext, Depends(require_tenant(Scope.SQL_READ))]
# The caller, if a platform admin.
PlatformAdmin = Annotated[Principal, Depends(require(Scope.PLATFORM_ADMIN))]
AuthDep = Annotated[AuthRuntime, Depends(auth_runtime)]


def connector_store(ctx: ContextDep) -> ControlStore:
    return ControlStore(ctx.mongo[CONTROL_DATABASE], sealer_for(ctx.settings))


# The connectors' control-plane store: connectors, their secrets and tasks (routes/connectors.py), write keys
# (routes/write_keys.py).
ConnectorStoreDep = Annotated[ControlStore, Depends(connector_store)]
