"""The configuration of a connector's single-message transforms: a JSON list of tagged objects, validated with
pydantic. The admin API validates and stores it; the worker builds the transforms from it
(:func:`control.connectors.chain.build`)::

    [{"type": "rename", "from": "owner", "to": "owners"},
     {"type": "filter", "pattern": "io.metalake.lineage.*", "mode": "drop"},
     {"type": "route", "pattern": "io.metalake.asset.*", "topic_class": "bulk"}]
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from tenants.naming import TopicClass


class _Spec(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, populate_by_name=True)


class StampTenantSpec(_Spec):
    type: Literal["stamp_tenant"] = "stamp_tenant"


class RenameSpec(_Spec):
    type: Literal["rename"] = "rename"
    source: str = Field(alias="from", min_length=1, max_length=256)
    target: str = Field(alias="to", min_length=1, max_length=256)


class FilterSpec(_Spec):
    type: Literal["filter"] = "filter"
    pattern: str = Field(min_length=1, max_length=256)
    mode: Literal["drop", "keep"] = "drop"


class RouteSpec(_Spec):
    type: Literal["route"] = "route"
    pattern: str = Field(min_length=1, max_length=256)
    topic_class: TopicClass


TransformSpec = Annotated[StampTenantSpec | RenameSpec | FilterSpec | RouteSpec, Field(discriminator="type")]
TRANSFORM_SPECS: TypeAdapter[list[TransformSpec]] = TypeAdapter(list[TransformSpec])
