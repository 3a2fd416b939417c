"""Engine registrations (a customer's Trino asking metalake for PII decisions) and the OPA decisions' answers; the
OPA plugin's requests are ``control.trino_opa``'s (re-exported here for the routes)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from control.trino_opa import (
    OpaAction,
    OpaColumn,
    OpaContext,
    OpaFunction,
    OpaIdentity,
    OpaInput,
    OpaQuery,
    OpaResource,
    OpaTable,
    OpaUser,
)

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
                "impersonators": ["superset"],
                "operators": ["trino-admin"],
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
    impersonators: list[str] = Field(
        default_factory=list,
        description="Trino users who may run queries as another user (a gateway's service user; `SET SESSION "
        "AUTHORIZATION` too). Never towards a PII user unless they hold the PII grant themselves. Default: nobody.",
    )
    operators: list[str] = Field(
        default_factory=list,
        description="Trino users who may view and kill every user's queries and write system information (graceful "
        "shutdown). Default: nobody; every user always sees and kills their own queries.",
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
    impersonators: list[str]
    operators: list[str]


class EngineCreated(EngineInfo):
    tenant: str
    key: str = Field(description="The engine's key, shown this once: it is part of the policy URIs.")
    access_control_properties: str = Field(
        description="The customer Trino's OPA access control file (`etc/opa-access-control.properties` in "
        "`trino_files`)."
    )
    trino_files: dict[str, str] = Field(
        description="The files to install under the customer Trino's `etc/`, by name: the line for "
        "`config.properties` (`access-control.config-files`, both access controls), the OPA file, and the "
        "restrictive file-based rules beside it (docs/enforcement.md)."
    )


class EnginesView(BaseModel):
    items: list[EngineInfo]


# -- the OPA plugin's requests: control.trino_opa (the access processor reads them too) ---------------------------


# -- the decisions, in the shapes Trino's OPA plugin reads ----------------------------------------------------------


class OpaAllowed(BaseModel):
    result: bool = Field(description="Whether the identity may do the action.")


class OpaKept(BaseModel):
    result: list[int] = Field(description="The indexes of the `filterResources` the identity keeps.")


class OpaExpression(BaseModel):
    expression: str = Field(description="A SQL expression: the row filter, or the column's mask.")


class OpaRowFilters(BaseModel):
    result: list[OpaExpression] = Field(description="The table's row filters (the consent filter); empty: none.")


class OpaIndexedMask(BaseModel):
    index: int = Field(description="The column's index in `filterResources`.")
    viewExpression: OpaExpression


class OpaColumnMasks(BaseModel):
    result: list[OpaIndexedMask] = Field(description="A mask per masked column; columns not listed are in clear.")


class OpaColumnMask(BaseModel):
    result: OpaExpression | None = Field(description="The column's mask; null: in clear.")


# The answer of each decision route, ``POST /v1/opa/{key}/<decision>`` (its body is an ``OpaQuery``, which the route
# reads itself once the key is checked, so the OpenAPI document learns both from here: ``api.openapi``).
OPA_ANSWERS: dict[str, type[BaseModel]] = {
    "allow": OpaAllowed,
    "batch": OpaKept,
    "row-filters": OpaRowFilters,
    "column-masks": OpaColumnMasks,
    "column-mask": OpaColumnMask,
}

__all__ = [
    "OpaAction",
    "OpaColumn",
    "OpaContext",
    "OpaFunction",
    "OpaIdentity",
    "OpaInput",
    "OpaQuery",
    "OpaResource",
    "OpaTable",
    "OpaUser",
]
