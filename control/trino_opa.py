"""What Trino's OPA access control POSTs to a decision endpoint: the shapes of Trino 476's ``plugin/trino-opa``
(``OpaQuery``/``OpaQueryInput``/``OpaQueryContext``/``TrinoIdentity``/``OpaQueryInputAction``/``OpaQueryInputResource``/
``TrinoSchema``/``TrinoTable``/``TrinoColumn``). Only the fields the decisions read are declared, the rest is accepted
and ignored (Trino sends many resource kinds). Read by the API's engine decisions (a customer's Trino) and the access
processor's lake decisions (metalake's own Trino).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore", populate_by_name=True)


class OpaIdentity(_Lenient):
    user: str
    groups: list[str] = Field(default_factory=list)


class OpaUser(_Lenient):
    """``resource.user``: the target of ``ImpersonateUser`` (``{"user": name}``) or a query's owner (its identity,
    unwrapped: ``{"user": name, "groups": [...]}``)."""

    user: str | None = None


class OpaFunction(_Lenient):
    """``resource.function`` (``TrinoFunction``: the catalog and schema unwrapped beside the name)."""

    catalogName: str | None = None
    schemaName: str | None = None
    functionName: str


class OpaContext(_Lenient):
    identity: OpaIdentity


class OpaSchema(_Lenient):
    """``resource.schema`` (``TrinoSchema``)."""

    catalogName: str
    schemaName: str


class OpaTable(_Lenient):
    catalogName: str  # Trino's field names
    schemaName: str
    tableName: str
    columns: list[str] | None = None  # FilterColumns: the batch's indexes are those of this list


class OpaColumn(OpaTable):
    columnName: str
    columnType: str | None = None


class OpaResource(_Lenient):
    # ``schema`` is a name pydantic's BaseModel keeps for itself: the field is ``schema_``, read from "schema".
    schema_: OpaSchema | None = Field(default=None, alias="schema")
    table: OpaTable | None = None
    column: OpaColumn | None = None
    user: OpaUser | None = None
    function: OpaFunction | None = None


class OpaAction(_Lenient):
    operation: str
    resource: OpaResource | None = None
    filterResources: list[OpaResource] | None = None


class OpaInput(_Lenient):
    context: OpaContext
    action: OpaAction


class OpaQuery(_Lenient):
    """What Trino's OPA access control POSTs to every decision route: the identity and the action
    (https://trino.io/docs/476/security/opa-access-control.html). Unknown fields are ignored."""

    input: OpaInput
