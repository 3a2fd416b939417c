"""Engine registrations (a customer's Trino asking metalake for PII decisions) and the OPA plugin's request shape.

The OPA shapes follow Trino 476's ``plugin/trino-opa`` (``OpaQuery``/``OpaQueryInput``/``OpaQueryContext``/
``TrinoIdentity``/``OpaQueryInputAction``/``OpaQueryInputResource``/``TrinoTable``/``TrinoColumn``): only the fields
the decisions read are declared, the rest is accepted and ignored (Trino sends many resource kinds).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

_NAME = r"^[A-Za-z0-9_][A-Za-z0-9_.@-]{0,127}$"
_CATALOG = r"^[a-z0-9_][a-z0-9_-]{0,63}$"


class CatalogMapping(BaseModel):
    model_config = ConfigDict(extra="forbid")

    catalog: str = Field(pattern=_CATALOG, description="The Trino catalog name in the customer's Trino.")
    platform: str = Field(
        pattern=r"^[a-z][a-z0-9_-]{0,63}$", description="The URN platform of the catalogued source (`postgres`)."
    )
    instance: str = Field(min_length=1, max_length=512, description="The URN instance (the crawler's `instance`).")
    database: str = Field(min_length=1, max_length=512, description="The source database the catalog reads.")


class EngineCreate(BaseModel):
    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "name": "analytics-trino",
                "catalogs": [
                    {"catalog": "warehouse", "platform": "postgres", "instance": "shop-prod", "database": "shop"}
                ],
                "pii_users": ["dpo"],
                "pii_groups": ["privacy-officers"],
                "mask_style": "redact",
                "consent_tag": "consent",
            }
        },
    )

    name: str = Field(pattern=_NAME, description="What the engine is, for people.")
    catalogs: list[CatalogMapping] = Field(min_length=1, description="Which Trino catalog reads which source.")
    pii_users: list[str] = Field(default_factory=list, description="Trino users who read PII in clear.")
    pii_groups: list[str] = Field(default_factory=list, description="Trino groups whose members read PII in clear.")
    mask_style: Literal["null", "redact", "hash"] = Field(
        default="redact",
        description="How a masked column reads: `redact` ('****' for strings, NULL otherwise), `hash` (SHA-256 hex "
        "of strings, NULL otherwise) or `null`.",
    )
    consent_tag: str | None = Field(
        default="consent",
        min_length=1,
        max_length=256,
        description="The tag of a boolean consent column: users without the PII grant see only the rows whose "
        "consent is true. `null`: no row filter.",
    )


class EngineInfo(BaseModel):
    engine_id: str
    name: str
    created_at: datetime
    catalogs: list[CatalogMapping]
    pii_users: list[str]
    pii_groups: list[str]
    mask_style: str
    consent_tag: str | None


class EngineCreated(EngineInfo):
    tenant: str
    key: str = Field(description="The engine's key, shown this once: it is part of the policy URIs.")
    access_control_properties: str = Field(description="The customer Trino's `etc/access-control.properties`.")


class EnginesView(BaseModel):
    items: list[EngineInfo]


# -- the OPA plugin's requests --------------------------------------------------------------------------------------


class _Lenient(BaseModel):
    model_config = ConfigDict(extra="ignore")


class OpaIdentity(_Lenient):
    user: str
    groups: list[str] = Field(default_factory=list)


class OpaContext(_Lenient):
    identity: OpaIdentity


class OpaTable(_Lenient):
    catalogName: str  # Trino's field names
    schemaName: str
    tableName: str


class OpaColumn(OpaTable):
    columnName: str
    columnType: str | None = None


class OpaResource(_Lenient):
    table: OpaTable | None = None
    column: OpaColumn | None = None


class OpaAction(_Lenient):
    operation: str
    resource: OpaResource | None = None
    filterResources: list[OpaResource] | None = None


class OpaInput(_Lenient):
    context: OpaContext
    action: OpaAction


class OpaQuery(_Lenient):
    input: OpaInput
