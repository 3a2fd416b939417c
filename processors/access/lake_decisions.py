"""The lake Trino's tenant checks, as the decisions of Trino's OPA access control: which schema a tenant's user may
touch, and which of its columns that user reads through a mask. Pure functions; the API's ``/v1/opa/lake/...`` routes
read the tenant's state and stored masks and call them (docs/serving.md, "The rules").

Trino asks every configured access control and needs each to allow. The rules file (``tenants.access.rules``) names
no tenant: it gives every tenant user (:data:`tenants.access.rules.TENANT_USERS`) what any tenant user may do (read
the lake catalog, run queries, set the SQL endpoint's session property; no connector metadata table, no admin-only
table for the non-admin users). These decisions add what depends on the tenant, so neither grows with the tenant
count, per query or per change:

- a tenant's user reaches only its tenant's schema (:class:`tenants.trino_schemas.SchemaNamer`) and the catalog's
  ``information_schema`` (whose rows Trino filters through :meth:`LakePolicy.batch`); every other schema of the lake
  catalog, the shared ``_pooled`` one included, is refused; ``SHOW SCHEMAS`` lists its own schema alone;
- a suspended tenant's users, or a tenant's being deleted, are refused everything, from the next query on;
- the plain and ``.admin`` users read the tenant's PII-tagged columns through a mask (``tenants.access.sync`` stores
  them per tenant); the ``.pii`` users in clear.

Users that are no tenant's (the platform's service users) are allowed here: the rules file decides for them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from tenants.access.rules import MaskStyle, mask_expression
from tenants.trino_schemas import SchemaNamer

# tenants.naming.trino_user, read back: ids hold no '.', so the suffixes are unambiguous.
_TENANT_USER = re.compile(r"tenant\.([a-z][a-z0-9-]{2,39})(\.admin)?(\.pii)?")
INFORMATION_SCHEMA = "information_schema"
FILTER_COLUMNS = "FilterColumns"
FILTER_SCHEMAS = "FilterSchemas"


@dataclass(frozen=True)
class LakeUser:
    """A tenant's Trino user, parsed (``tenant.<id>[.admin][.pii]``)."""

    tenant: str
    admin: bool
    pii: bool


def lake_user(user: str) -> LakeUser | None:
    """The tenant user ``user`` names, or None (a service user, or anyone else)."""
    match = _TENANT_USER.fullmatch(user)
    if match is None:
        return None
    return LakeUser(match.group(1), admin=match.group(2) is not None, pii=match.group(3) is not None)


# The fields of the OPA plugin's resources these decisions read (api.schemas.engines' models have them).
class _Named(Protocol):
    @property
    def catalogName(self) -> str | None: ...
    @property
    def schemaName(self) -> str | None: ...


class _Table(_Named, Protocol):
    @property
    def columns(self) -> list[str] | None: ...


class LakeResource(Protocol):
    @property
    def schema_(self) -> _Named | None: ...
    @property
    def table(self) -> _Table | None: ...
    @property
    def column(self) -> _Named | None: ...
    @property
    def function(self) -> _Named | None: ...


def _information(resource: LakeResource) -> bool:
    return resource.schema_ is not None and resource.schema_.schemaName == INFORMATION_SCHEMA


@dataclass(frozen=True)
class LakePolicy:
    """The deployment's side of the decisions: its lake catalog, how tenants' schemas are named, the mask style."""

    catalog: str
    schemas: SchemaNamer
    mask_style: MaskStyle = "redact"

    def _reaches(self, user: LakeUser, resource: LakeResource | None) -> bool:
        if resource is None:
            return True
        for named in (resource.schema_, resource.table, resource.column, resource.function):
            if named is None or named.catalogName != self.catalog or named.schemaName is None:
                continue
            if named.schemaName not in (INFORMATION_SCHEMA, self.schemas.schema(user.tenant)):
                return False
        return True

    def allow(self, user: str, active: bool, resource: LakeResource | None) -> bool:
        """Whether ``user`` may act on ``resource`` (any operation: the rules file decides which ones). ``active``:
        the user's tenant is not suspended or being deleted (read by the caller; ignored for non-tenant users)."""
        tenant_user = lake_user(user)
        if tenant_user is None:
            return True
        return active and self._reaches(tenant_user, resource)

    def batch(self, operation: str, user: str, active: bool, resources: Sequence[LakeResource]) -> list[int]:
        """The indexes of ``resources`` the user keeps. ``FilterColumns`` sends one table with its ``columns``: the
        indexes are the columns', all of them or none (the table's own check)."""
        if operation == FILTER_COLUMNS:
            return [
                i
                for resource in resources[:1]
                if resource.table is not None and self.allow(user, active, resource)
                for i in range(len(resource.table.columns or []))
            ]
        if operation == FILTER_SCHEMAS and lake_user(user) is not None:
            # A listing shows the tenant its own schema only, as the rules file does: not information_schema, which
            # its queries may still read (Trino filters its rows through the same decisions).
            return [i for i, r in enumerate(resources) if self.allow(user, active, r) and not _information(r)]
        return [i for i, resource in enumerate(resources) if self.allow(user, active, resource)]

    def masks(
        self,
        user: str,
        columns: Sequence[tuple[str, str, str, str, str | None]],
        masked: Mapping[str, Mapping[str, str | None]],
    ) -> list[tuple[int, str]]:
        """(index, mask) of the ``columns`` (catalog, schema, table, column, Trino type) ``user`` reads masked: its
        tenant's ``masked`` columns (``{table: {column: stored type}}``) in its own schema, for a plain or ``.admin``
        user. The type Trino sends wins over the stored one (a column retyped since the masks were stored)."""
        tenant_user = lake_user(user)
        if tenant_user is None or tenant_user.pii:
            return []
        own = self.schemas.schema(tenant_user.tenant)
        out = []
        for i, (catalog, schema, table, column, data_type) in enumerate(columns):
            if catalog != self.catalog or schema != own or column not in masked.get(table, {}):
                continue
            out.append((i, mask_expression(column, data_type or masked[table][column], self.mask_style)))
        return out
