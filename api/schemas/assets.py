"""Asset bodies: an asset with its direct and propagated tags, search summaries, tag changes and their acceptance,
lineage graphs and incidents."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from api.schemas.urns import URN_MAX as URN_MAX  # routes import it from here
from api.schemas.urns import Canonical
from api.services.lineage import Direction

TAG_PATTERN = r"^[A-Za-z][A-Za-z0-9_.:/-]{0,127}$"


class TagView(BaseModel):
    """A tag set on the asset itself, by a person or an automatic classifier, with its propagation options."""

    model_config = ConfigDict(extra="allow")

    tag: str
    source: str | None = Field(default=None, description="human | auto | propagated")
    propagate: bool | None = None
    restrict_propagation_through_lineage: bool | None = None
    remove_propagations_on_entity_delete: bool | None = None
    confidence: float | None = None
    rule: str | None = None
    actor: str | None = None
    version: int | None = None
    updated_at: datetime | None = None


class PropagatedTagView(BaseModel):
    """A tag that reached the asset along lineage from ``origin``."""

    model_config = ConfigDict(extra="allow")

    tag: str
    origin: str | None = None
    path: list[str] | None = None
    depth: int | None = None
    version: int | None = None


class AssetView(BaseModel):
    """An asset's current state with its tags and its health (from its Monte Carlo incidents). Other fields the
    projection holds pass through."""

    model_config = ConfigDict(
        extra="allow",
        json_schema_extra={
            "example": {
                "urn": "urn:metalake:postgres:prod/shop/public/orders",
                "kind": "table",
                "name": "orders",
                "platform": "postgres",
                "qualified_name": "shop.public.orders",
                "description": "One row per order",
                "owners": ["data@acme.example"],
                "version": 1732240000000,
                "tags": [{"tag": "PII", "source": "human", "propagate": True, "actor": "client-42"}],
                "propagated_tags": [],
            }
        },
    )

    urn: str
    kind: str | None = None
    name: str | None = None
    platform: str | None = None
    qualified_name: str | None = None
    description: str | None = None
    data_type: str | None = None
    owners: list[str] | None = None
    properties: dict[str, Any] | None = None
    version: int | None = None
    event_time: datetime | None = None
    updated_at: datetime | None = None
    tags: list[TagView] = Field(default_factory=list)
    propagated_tags: list[PropagatedTagView] = Field(default_factory=list)
    edited: list[str] = Field(
        default_factory=list,
        description="Aspects a person set through the API (`description`, `owners`, `properties.<name>`): their "
        "values above are the person's, not the source's, until cleared.",
    )
    health: str | None = Field(
        default=None,
        description="`degraded` while an incident on the asset is open (status `opened` or `updated`), else "
        "`healthy` (docs/streaming.md#asset-health).",
        examples=["degraded"],
    )
    health_severity: str | None = Field(
        default=None, description="The worst declared severity among the open incidents (`SEV-1` first); null: none."
    )
    open_incidents: int | None = Field(default=None, description="How many incidents on the asset are open.")
    open_incident_ids: list[str] | None = Field(
        default=None, description="The open incidents' ids, sorted; null until the first incident on the asset."
    )
    health_version: int | None = Field(
        default=None, description="With `health_event_id`: the newest incident row's (version, event id), the guard."
    )
    health_event_id: str | None = None
    health_updated_at: datetime | None = Field(default=None, description="When the job computed the health.")


class AssetSummary(BaseModel):
    urn: str
    name: str | None = None
    kind: str | None = None
    platform: str | None = None
    qualified_name: str | None = None
    tags: list[str] = Field(default_factory=list, description="Direct and propagated tags, sorted, each once.")


class TagChange(BaseModel):
    """Put a tag on an asset. The propagation options are Apache Atlas's: ``propagate`` lets the tag flow along
    lineage; ``restrict_propagation_through_lineage`` keeps it on this asset; ``remove_propagations_on_entity_delete``
    removes what it propagated when the asset is deleted."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"example": {"urn": "urn:metalake:postgres:prod/shop/public/orders/email", "tag": "PII"}},
    )

    urn: Annotated[str, Field(min_length=1, max_length=URN_MAX), Canonical]
    tag: str = Field(pattern=TAG_PATTERN)
    propagate: bool = True
    restrict_propagation_through_lineage: bool = False
    remove_propagations_on_entity_delete: bool = False


class TagAccepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    event_id: str
    type: str
    urn: str
    tag: str
    version: int = Field(description="Orders this change among the asset's changes (ms).")


PROPERTY_NAME_PATTERN = r"^[A-Za-z0-9_.:-]{1,128}$"


class AssetEdit(BaseModel):
    """Set or clear a person's value of an asset's description, owners or custom properties. A field left out is
    left as it is; ``null`` clears the person's value (the source's shows again); a value wins over the source's
    until cleared. ``properties`` edits one property per key: a string sets it, ``null`` clears it."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "example": {
                "urn": "urn:metalake:postgres:prod/shop/public/orders",
                "description": "One row per order, net of refunds",
                "owners": ["sales-data@acme.example"],
                "properties": {"tier": "1", "domain": None},
            }
        },
    )

    urn: Annotated[str, Field(min_length=1, max_length=URN_MAX), Canonical]
    description: str | None = None
    owners: list[str] | None = None
    properties: dict[str, str | None] | None = None


class EditAccepted(BaseModel):
    """One published edit event: an aspect set (``io.metalake.asset.edited.v1``) or cleared (``...edit.cleared.v1``)."""

    aspect: str
    event_id: str
    type: str
    version: int = Field(description="Orders this change among the edits of this aspect of the asset (ms).")


class EditsAccepted(BaseModel):
    status: Literal["accepted"] = "accepted"
    urn: str
    changes: list[EditAccepted] = Field(
        description="One event per aspect that changed, in Kafka; an aspect already so is not published again."
    )


class LineageNode(BaseModel):
    urn: str
    depth: int
    name: str | None = Field(
        default=None,
        description="Null when no live asset describes the URN yet: an edge can name an asset before the asset's own "
        "event reached MongoDB (the bulk topic's columns and the priority topic's tables are projected apart), or "
        "after it was deleted.",
    )
    kind: str | None = Field(default=None, description="Null when `name` is.")


class LineageEdge(BaseModel):
    upstream: str
    urn: str = Field(description="The downstream asset.")
    transformation: str | None = None
    blocked_tags: list[str] | None = None
    propagation: str | None = Field(default=None, description="Tags flow: downstream (default), upstream, both, none.")


class LineageView(BaseModel):
    urn: str
    direction: Direction
    depth: int
    nodes: list[LineageNode]
    edges: list[LineageEdge]
    truncated: bool = Field(description="Whether a bound (depth or node budget) cut the graph; `reason` says which.")
    reason: str | None = None


class IncidentView(BaseModel):
    model_config = ConfigDict(extra="allow")

    incident_id: str
    urn: str
    status: str | None = None
    incident_type: str | None = None
    webhook_type: str | None = None
    feedback: str | None = None
    severity: str | None = None
    owner: str | None = None
    url: str | None = None
    summary: str | None = None
    version: int | None = None
    event_time: datetime | None = None
    updated_at: datetime | None = None
