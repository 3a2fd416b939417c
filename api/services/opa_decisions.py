"""The OPA ``allow`` and ``batch`` decisions for a customer's Trino (docs/enforcement.md, "The decisions").

metalake masks PII and filters rows by consent; these decisions refuse the operations that would get round that, or
that let one Trino user read another's work, whatever the customer's own access control says (Trino 476 needs every
configured access control to allow an operation). Operation names and request shapes are Trino 476's
``plugin/trino-opa`` (``OpaAccessControl``, ``OpaBatchAccessControl``):

- ``ImpersonateUser`` (``resource.user.user`` is the target): asked when an authenticated user sends another user
  name, when ``X-Trino-Original-User`` differs from ``X-Trino-User``, and by ``SET SESSION AUTHORIZATION`` (Trino
  has no operation of its own for it). Masks are computed for the session's user, so impersonating a PII user reads
  PII in clear. Allowed only to the engine's ``impersonators``, and towards a PII user only if the impersonator holds
  the PII grant itself. Trino names the target user only, not its groups: with ``pii_groups`` an impersonator needs
  the PII grant for any target (a member of such a group would read in clear).
- ``ViewQueryOwnedBy``, ``KillQueryOwnedBy`` and the filter ``FilterViewQueryOwnedBy`` (``system.runtime.queries``,
  the web UI): one's own queries, or the engine's ``operators``. A query's text carries literals (PII included).
- ``WriteSystemInformation`` (graceful shutdown): ``operators`` only.
- ``ExecuteFunction``, ``CreateViewWithExecuteFunction`` and ``ExecuteProcedure`` in a catalog the engine maps:
  only for users with the PII grant. The catalog's functions are its pass-through table functions
  (``TABLE(warehouse.system.query(...))``: the source database answers, no mask applies) and its procedures
  (``CALL warehouse.system.execute(...)`` runs SQL in the source, e.g. copying a PII column to an untagged table).
- ``SetViewAuthorization`` and ``SetTableAuthorization``: only for users with the PII grant (a ``SECURITY DEFINER``
  view is read with its owner's masks; handing it to a PII user would unmask it).

Everything else is allowed: who may reach which catalog, table or column, and who may write, is the customer's own
access control's decision (the restrictive rules file handed out beside this one). Pure functions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from api.services.enforcement import Engine


# The fields of the OPA plugin's request the decisions read (api.schemas.engines' models have them).
class OpaIdentity(Protocol):
    @property
    def user(self) -> str: ...
    @property
    def groups(self) -> list[str]: ...


class _User(Protocol):
    @property
    def user(self) -> str | None: ...


class _Function(Protocol):
    @property
    def catalogName(self) -> str | None: ...


class _Table(Protocol):
    @property
    def columns(self) -> list[str] | None: ...


class OpaResource(Protocol):
    @property
    def user(self) -> _User | None: ...
    @property
    def function(self) -> _Function | None: ...
    @property
    def table(self) -> _Table | None: ...


IMPERSONATE = "ImpersonateUser"
QUERY_OWNER_CHECKS = frozenset({"ViewQueryOwnedBy", "KillQueryOwnedBy", "FilterViewQueryOwnedBy"})
FILTER_QUERIES = "FilterViewQueryOwnedBy"
FILTER_COLUMNS = "FilterColumns"
WRITE_SYSTEM = "WriteSystemInformation"
CATALOG_ROUTINES = frozenset({"ExecuteFunction", "CreateViewWithExecuteFunction", "ExecuteProcedure"})
OWNER_CHANGES = frozenset({"SetViewAuthorization", "SetTableAuthorization"})


def _may_impersonate(engine: Engine, identity: OpaIdentity, resource: OpaResource | None) -> bool:
    target = resource.user.user if resource is not None and resource.user is not None else None
    if target is None:
        return False
    if target == identity.user:
        return True
    if identity.user not in engine.impersonators:
        return False
    if engine.sees_pii(identity.user, identity.groups):
        return True
    # Trino names the target only: a member of a pii_groups group cannot be told apart from anyone else.
    return target not in engine.pii_users and not engine.pii_groups


def _owns_or_operates(engine: Engine, identity: OpaIdentity, resource: OpaResource | None) -> bool:
    owner = resource.user.user if resource is not None and resource.user is not None else None
    return identity.user in engine.operators or (owner is not None and owner == identity.user)


def _routine_allowed(engine: Engine, identity: OpaIdentity, resource: OpaResource | None) -> bool:
    function = resource.function if resource is not None else None
    if function is None or function.catalogName is None or engine.source_for(function.catalogName) is None:
        return True  # not a mapped catalog's routine: the customer's access control decides
    return engine.sees_pii(identity.user, identity.groups)


def allow(engine: Engine, operation: str, identity: OpaIdentity, resource: OpaResource | None) -> bool:
    """Whether ``identity`` may run ``operation`` on ``resource`` (the ``allow`` URI)."""
    if operation == IMPERSONATE:
        return _may_impersonate(engine, identity, resource)
    if operation in QUERY_OWNER_CHECKS:
        return _owns_or_operates(engine, identity, resource)
    if operation == WRITE_SYSTEM:
        return identity.user in engine.operators
    if operation in CATALOG_ROUTINES:
        return _routine_allowed(engine, identity, resource)
    if operation in OWNER_CHANGES:
        return engine.sees_pii(identity.user, identity.groups)
    return True


def batch(engine: Engine, operation: str, identity: OpaIdentity, resources: Sequence[OpaResource]) -> list[int]:
    """The indexes of the resources ``identity`` keeps (the ``batch`` URI). ``FilterColumns`` sends one table with
    its ``columns``: the indexes are the columns'."""
    if operation == FILTER_COLUMNS:
        return [
            i
            for resource in resources[:1]
            if resource.table is not None
            for i in range(len(resource.table.columns or []))
        ]
    if operation in QUERY_OWNER_CHECKS:
        return [i for i, resource in enumerate(resources) if _owns_or_operates(engine, identity, resource)]
    return [i for i, resource in enumerate(resources) if allow(engine, operation, identity, resource)]


def batch_size(operation: str, resources: Sequence[OpaResource]) -> int:
    """How many items a batch request asks about (the columns of a ``FilterColumns`` table)."""
    if operation == FILTER_COLUMNS:
        return sum(len(r.table.columns or []) for r in resources if r.table is not None)
    return len(resources)
