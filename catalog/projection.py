"""The documents of a tenant's MongoDB projection (``metalake_<tenant>``): one collection per kind of current state.

The streaming job writes them (``processors.enrichment.projection``, shaped by the state specs of
``processors.enrichment.state``); the API's catalog, the propagation and the access rules read them. Declared here, in
``catalog``, because both sides import it (the deployables do not import one another).

What every document holds: ``_id``, the state key (``urn``; ``urn|tag``; ``upstream|urn``; ``incident_id|urn``;
``urn|tag|origin``; ``urn|aspect``), the key fields again as fields, and the meta fields (``deleted``, ``version``,
``event_id``, ``event_time``, ``updated_at``). A removal leaves a tombstone (``deleted: true``) that keeps the key and
meta fields only, so a tombstone that came first has none of the other fields: they are NotRequired. An asset's
fields are *carried* (an event may leave one out and keep the held value, a null is never written), so they are never
``None``; the other kinds' fields are replaced by each event, null included.
"""

# No ``from __future__ import annotations``: with string annotations Python 3.11 cannot tell NotRequired fields at
# run time, and the unit test that pins these documents to the job's state specs reads __required_keys__.
import re
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, NotRequired, TypedDict

from pymongo.collection import Collection
from pymongo.database import Database

from metalake.mongo import typed_collection

ASSETS_COLLECTION = "assets"
CLASSIFICATIONS_COLLECTION = "classifications"
LINEAGE_COLLECTION = "lineage"
INCIDENTS_COLLECTION = "incidents"
PROPAGATED_COLLECTION = "propagated_tags"
ASSET_EDITS_COLLECTION = "asset_edits"
# The aspects a person may edit: the description, the owners, and custom properties (``properties.<name>``).
EDITED_DESCRIPTION = "description"
EDITED_OWNERS = "owners"
EDITED_PROPERTY_PREFIX = "properties."


# An asset's property names come from sources (Spark conf names, OpenLineage facets, dbt meta) and often hold ".";
# FerretDB, like MongoDB before 5.0, refuses a field name with "." or a leading "$" (and NUL anywhere), and one such
# document would stop the job's projection query. Stored percent-encoded ("%" first, so decoding is exact).
_KEY_ESCAPES = {"%": "%25", ".": "%2E", "$": "%24", "\x00": "%00"}
_KEY_UNESCAPES = {v: k for k, v in _KEY_ESCAPES.items()}
_ESCAPED = re.compile("|".join(re.escape(v) for v in _KEY_UNESCAPES))


def escape_keys(values: dict[str, Any]) -> dict[str, Any]:
    """``values`` with names MongoDB can store (see above); :func:`unescape_keys` restores them."""
    return {"".join(_KEY_ESCAPES.get(ch, ch) for ch in k): v for k, v in values.items()}


def unescape_keys(values: dict[str, Any]) -> dict[str, Any]:
    return {_ESCAPED.sub(lambda m: _KEY_UNESCAPES[m.group(0)], k): v for k, v in values.items()}


class AssetDoc(TypedDict):
    """A document of ``assets`` (``_id``: the URN), with the health the job derives from the asset's incidents."""

    _id: str
    urn: str
    kind: NotRequired[str]
    name: NotRequired[str]
    # Derived from the URN by the job.
    platform: NotRequired[str]
    qualified_name: NotRequired[str]
    description: NotRequired[str]
    data_type: NotRequired[str]
    owners: NotRequired[list[str]]
    properties: NotRequired[dict[str, str]]  # names escaped: escape_keys / unescape_keys
    deleted: bool
    version: int
    event_id: str
    event_time: datetime | None
    updated_at: datetime
    # Health: ``health`` and ``open_incidents`` are set when the asset is inserted (healthy, 0), the rest by the
    # first health computation, guarded by (health_version, health_event_id).
    health: str
    open_incidents: int
    health_severity: NotRequired[str | None]
    open_incident_ids: NotRequired[list[str]]
    health_version: NotRequired[int]
    health_event_id: NotRequired[str]
    health_updated_at: NotRequired[datetime]


class ClassificationDoc(TypedDict):
    """A document of ``classifications`` (``_id``: ``urn|tag``): a tag set on the asset itself."""

    _id: str
    urn: str
    tag: str
    # "human", "auto" or "propagated"; a human's row is never replaced by an automatic one.
    source: NotRequired[str | None]
    propagate: NotRequired[bool | None]
    confidence: NotRequired[float | None]
    rule: NotRequired[str | None]
    actor: NotRequired[str | None]
    remove_propagations_on_entity_delete: NotRequired[bool | None]
    restrict_propagation_through_lineage: NotRequired[bool | None]
    # The normalised URN of the asset and of its parent (catalog.urn_keys); missing until the tenant's backfill.
    urn_keys: NotRequired[list[str]]
    deleted: bool
    version: int
    event_id: str
    event_time: datetime | None
    updated_at: datetime


class LineageDoc(TypedDict):
    """A document of ``lineage`` (``_id``: ``upstream|urn``): an edge from ``upstream`` to the downstream ``urn``."""

    _id: str
    upstream: str
    urn: str
    blocked_tags: NotRequired[list[str] | None]
    transformation: NotRequired[str | None]
    # Which way tags cross the edge: "downstream", "upstream", "both" or "none".
    propagation: NotRequired[str | None]
    deleted: bool
    version: int
    event_id: str
    event_time: datetime | None
    updated_at: datetime


class IncidentDoc(TypedDict):
    """A document of ``incidents`` (``_id``: ``incident_id|urn``): a Monte Carlo incident on one asset."""

    _id: str
    incident_id: str
    urn: str
    status: NotRequired[str | None]
    incident_type: NotRequired[str | None]
    webhook_type: NotRequired[str | None]
    feedback: NotRequired[str | None]
    severity: NotRequired[str | None]
    owner: NotRequired[str | None]
    url: NotRequired[str | None]
    summary: NotRequired[str | None]
    deleted: bool
    version: int
    event_id: str
    event_time: datetime | None
    updated_at: datetime


class PropagatedTagDoc(TypedDict):
    """A document of ``propagated_tags`` (``_id``: ``urn|tag|origin``): a tag that reached ``urn`` along lineage from
    ``origin``; written through the job by ``processors.propagation``'s events."""

    _id: str
    urn: str
    tag: str
    origin: str
    # The URNs from the origin to this asset.
    path: NotRequired[list[str] | None]
    depth: NotRequired[int | None]
    urn_keys: NotRequired[list[str]]  # as ClassificationDoc's
    deleted: bool
    version: int
    event_id: str
    event_time: datetime | None
    updated_at: datetime


class AssetEditDoc(TypedDict):
    """A document of ``asset_edits`` (``_id``: ``urn|aspect``): a person's value for one aspect of an asset, laid
    over the source's value by :func:`apply_edits`. A cleared edit is a tombstone (``deleted: true``)."""

    _id: str
    urn: str
    # "description", "owners" or "properties.<name>".
    aspect: str
    # The description or the property's value ("description", "properties.<name>").
    text: NotRequired[str | None]
    owners: NotRequired[list[str] | None]
    actor: NotRequired[str | None]
    deleted: bool
    version: int
    event_id: str
    event_time: datetime | None
    updated_at: datetime


class EditedAsset(TypedDict):
    """What a reader shows of an asset's editable aspects: the person's value where one is live, else the
    source's; ``edited`` names the aspects a person set (sorted)."""

    description: str | None
    owners: list[str] | None
    properties: dict[str, str] | None
    edited: list[str]


def apply_edits(asset: Mapping[str, Any], edits: Iterable[Mapping[str, Any]]) -> EditedAsset:
    """The merge rule of edits: a live (not cleared) edit of an aspect wins over the source's value, whatever the
    versions of either (they order different things); a cleared edit (tombstone) shows the source's value again.
    A property edit sets that one property and leaves the source's other properties as they are. Pure."""
    description = asset.get("description")
    owners = asset.get("owners")
    properties: dict[str, str] | None = dict(asset["properties"]) if asset.get("properties") is not None else None
    edited: list[str] = []
    for edit in edits:
        if edit.get("deleted"):
            continue
        aspect = str(edit.get("aspect"))
        if aspect == EDITED_DESCRIPTION:
            description = edit.get("text")
        elif aspect == EDITED_OWNERS:
            owners = list(edit.get("owners") or [])
        elif aspect.startswith(EDITED_PROPERTY_PREFIX) and edit.get("text") is not None:
            properties = {**(properties or {}), aspect.removeprefix(EDITED_PROPERTY_PREFIX): str(edit["text"])}
        else:
            continue  # an aspect this reader does not know: shown by none of the fields
        edited.append(aspect)
    return EditedAsset(description=description, owners=owners, properties=properties, edited=sorted(edited))


def assets(database: Database[Any]) -> Collection[AssetDoc]:
    return typed_collection(database, ASSETS_COLLECTION, AssetDoc)


def classifications(database: Database[Any]) -> Collection[ClassificationDoc]:
    return typed_collection(database, CLASSIFICATIONS_COLLECTION, ClassificationDoc)


def lineage(database: Database[Any]) -> Collection[LineageDoc]:
    return typed_collection(database, LINEAGE_COLLECTION, LineageDoc)


def incidents(database: Database[Any]) -> Collection[IncidentDoc]:
    return typed_collection(database, INCIDENTS_COLLECTION, IncidentDoc)


def propagated_tags(database: Database[Any]) -> Collection[PropagatedTagDoc]:
    return typed_collection(database, PROPAGATED_COLLECTION, PropagatedTagDoc)


def asset_edits(database: Database[Any]) -> Collection[AssetEditDoc]:
    return typed_collection(database, ASSET_EDITS_COLLECTION, AssetEditDoc)


def live_edits(database: Database[Any], urn: str, limit: int) -> list[AssetEditDoc]:
    """The asset's live edits by aspect, at most ``limit``, for :func:`apply_edits`: every reader that shows an
    asset's description, owners or properties (the API, outbound messages naming owners) lays them over the asset."""
    found = asset_edits(database).find({"urn": urn, "deleted": {"$ne": True}}).sort("_id", 1).limit(limit)
    return list(found)
