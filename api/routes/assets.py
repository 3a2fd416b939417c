"""Assets of a tenant, read from its MongoDB projection; tags and a person's edits changed by publishing events.

URNs contain ``/``, so they travel in the query string or the body, never in the path. Reads need ``tenant:read``
(or ``tenant:admin``); tagging needs ``tenant:admin`` or ``events:write``. A change that may unmask PII (removing a
tag ``access.pii_tags`` matches, or a protective one: a consent tag, ``control.auth.protective``; or adding one that
does not spread downstream) also needs ``pii:read`` or
``tenant:admin`` (:mod:`control.auth.pii`): 403 ``pii-grant-required`` otherwise, audited. A tag change is an
event like any other: it is published to the tenant's priority topic, the answer is 202 once Kafka confirmed it, and
the projection shows it within seconds. So is an edit of the description, owners or custom properties (``PATCH``,
same scopes as tagging): one ``io.metalake.asset.edited.v1`` or ``...edit.cleared.v1`` event per aspect, kept in the
``asset_edits`` state apart from the sources' values and laid over them on reads (docs/edits.md).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Query
from pydantic import StringConstraints

from api.auth.deps import require_tenant
from api.context import ApiContext, ContextDep
from api.deps import TenantReader
from api.paging import DEFAULT_LIMIT, CursorParam, Limit, decode_cursor, encode_cursor
from api.problems import Problem
from api.schemas.assets import (
    PROPERTY_NAME_PATTERN,
    TAG_PATTERN,
    URN_MAX,
    AssetEdit,
    AssetSummary,
    AssetView,
    EditAccepted,
    EditsAccepted,
    IncidentView,
    LineageEdge,
    LineageNode,
    LineageView,
    TagAccepted,
    TagChange,
)
from api.schemas.common import Page
from api.schemas.urns import Canonical, CanonicalOrNone
from api.security import TenantContext
from api.services import audit
from api.services.catalog import Catalog, TooBroad
from api.services.events import PublisherDep, TenantPublisher
from api.services.lineage import DEFAULT_DEPTH, DEFAULT_NODES, MAX_DEPTH, MAX_NODES, Direction, traverse
from catalog.projection import (
    EDITED_DESCRIPTION,
    EDITED_OWNERS,
    EDITED_PROPERTY_PREFIX,
    AssetDoc,
    AssetEditDoc,
    ClassificationDoc,
    EditedAsset,
    apply_edits,
)
from control.auth.pii import may_weaken, weakening
from control.auth.principal import Scope
from control.auth.settings import ApiSettings
from metalake.events import new_event
from metalake.events.validation import InvalidData
from tenants.naming import names_for

ADDED = "io.metalake.classification.added.v1"
REMOVED = "io.metalake.classification.removed.v1"
EDITED = "io.metalake.asset.edited.v1"
CLEARED = "io.metalake.asset.edit.cleared.v1"
_PROPERTY_NAME = re.compile(PROPERTY_NAME_PATTERN)

# Changing a tag is sending an event about the tenant's catalog: an administrator or a client that sends events.
TagWriter = Annotated[TenantContext, Depends(require_tenant(Scope.TENANT_ADMIN, Scope.EVENTS_WRITE))]
TagName = Annotated[str, StringConstraints(pattern=TAG_PATTERN)]
# Canonical: stored rows hold the canonical spelling, so another one would find nothing.
UrnQuery = Annotated[str, Query(min_length=1, max_length=URN_MAX, description="The asset URN."), Canonical]
TagQuery = Annotated[str, Query(pattern=TAG_PATTERN, description="Tag name, e.g. `PII` or `GDPR.personal`.")]

_ERRORS: dict[int | str, dict[str, Any]] = {
    401: {"description": "No valid access token."},
    403: {"description": "The token lacks the scope."},
    404: {"description": "No such tenant or asset (another tenant's objects answer 404 too)."},
    422: {"description": "Invalid parameter (problem+json naming the field)."},
}
_LIST_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    400: {"description": "Bad cursor (problem+json naming `cursor`)."},
}
_PUBLISH_ERRORS: dict[int | str, dict[str, Any]] = {
    **_ERRORS,
    403: {
        "description": "The token lacks the scope, or the change may unmask PII and the token holds neither "
        "`pii:read` nor `tenant:admin` (`pii-grant-required`, naming the field)."
    },
    409: {"description": "The tag is propagated, not set on this asset: remove it at its origin."},
    503: {"description": "Kafka did not confirm the event; nothing changed. Retry after `Retry-After` seconds."},
}

router = APIRouter(prefix="/v1/tenants/{tenant}/assets", tags=["assets"])

# -- helpers --------------------------------------------------------------------------------------------------------

_HIDDEN = frozenset({"_id", "deleted", "event_id"})


def _public(doc: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in doc.items() if k not in _HIDDEN}


def _node(urn: str, depth: int, summary: AssetDoc | None) -> LineageNode:
    """A reached asset; without a summary (an edge names it, no live asset describes it) it has no name or kind."""
    if summary is None:
        return LineageNode(urn=urn, depth=depth, name=None, kind=None)
    return LineageNode(urn=urn, depth=depth, name=summary.get("name"), kind=summary.get("kind"))


def _catalog(ctx: ApiContext, tenant: str) -> Catalog:
    return Catalog(ctx.mongo[names_for(tenant, ctx.settings.lake_root).mongo_database])


def _live_asset(catalog: Catalog, urn: str) -> AssetDoc:
    doc = catalog.asset(urn)
    if doc is None:
        raise Problem(404, "not-found", "no such asset", field="urn")
    if doc.get("deleted"):
        raise Problem(404, "not-found", "the asset was deleted", field="urn")
    return doc


# -- routes ---------------------------------------------------------------------------------------------------------


@router.get("", summary="Get an asset by URN", response_model=AssetView, responses=_ERRORS)
def get_asset(tc: TenantReader, ctx: ContextDep, urn: UrnQuery) -> AssetView:
    """The asset's current state, its direct tags and the tags propagated to it."""
    catalog = _catalog(ctx, tc.tenant)
    doc = _live_asset(catalog, urn)
    out = _public(doc)
    out["urn"] = doc.get("urn") or doc["_id"]
    out["tags"] = [_public(t) for t in catalog.tags_of([urn]).get(urn, [])]
    out["propagated_tags"] = [_public(t) for t in catalog.propagated_of([urn]).get(urn, [])]
    out.update(apply_edits(doc, catalog.edits_of(urn, _edits_bound(ctx.settings.api))))
    return AssetView.model_validate(out)


@router.get("/search", summary="Search assets", response_model=Page[AssetSummary], responses=_LIST_ERRORS)
def search_assets(  # noqa: PLR0913
    tc: TenantReader,
    ctx: ContextDep,
    prefix: Annotated[
        str | None, Query(min_length=1, max_length=256, description="Name prefix (case-sensitive).")
    ] = None,
    tag: Annotated[list[TagName], Query(description="Only assets with this tag (repeat: all of them).")] = [],  # noqa: B006
    classification: Annotated[
        str | None, Query(pattern=TAG_PATTERN, description="Only assets with a tag of this family (`GDPR`: GDPR.*).")
    ] = None,
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> Page[AssetSummary]:
    """Live assets whose name starts with ``prefix`` (sorted by name, then URN; without a prefix, by URN), having
    every ``tag`` (direct or propagated) and a tag of the ``classification`` family."""
    kind = "assets.name" if prefix is not None else "assets.urn"
    arity = 2 if prefix is not None else 1
    resume = decode_cursor(kind, cursor, arity)
    catalog = _catalog(ctx, tc.tenant)
    try:
        page = catalog.search(prefix=prefix, tags=tag, classification=classification, resume_after=resume, limit=limit)
    except TooBroad:
        raise Problem(422, "too-broad", "tag: too many assets carry this tag; add a name prefix", field="tag") from None
    urns = [d["_id"] for d in page.docs]
    direct, propagated = catalog.tags_of(urns), catalog.propagated_of(urns)
    items = [
        AssetSummary(
            urn=d["_id"],
            name=d.get("name"),
            kind=d.get("kind"),
            platform=d.get("platform"),
            qualified_name=d.get("qualified_name"),
            tags=sorted({t["tag"] for t in [*direct.get(d["_id"], []), *propagated.get(d["_id"], [])]}),
        )
        for d in page.docs
    ]
    next_cursor = None
    if page.has_more and page.docs:
        last = page.docs[-1]
        next_cursor = encode_cursor(kind, [last["name"], last["_id"]] if prefix is not None else [last["_id"]])
    return Page[AssetSummary](items=items, next_cursor=next_cursor)


def _next_version(publisher: TenantPublisher, held: ClassificationDoc | AssetEditDoc | None) -> int:
    """The API's clock, but always past the version the projection holds for this (urn, tag) or (urn, aspect): a
    person's change must apply even if an earlier one carried a later clock (another API replica, a source's own
    sequence)."""
    held_version = held.get("version") if held is not None else None
    return publisher.clock.next(at_least=held_version + 1 if isinstance(held_version, int) else 0)


def _guard_pii(tc: TenantContext, ctx: ApiContext, event_type: str, data: dict[str, Any], action: str) -> bool:
    """Refuse (403, audited) a change that may unmask PII unless the caller holds the PII grant; True if the change
    may unmask PII (the caller holds the grant: its audit row says ``pii``)."""
    # PII tags, and the tags that filter rows in the tenant's engines (consent): control/auth/protective.py.
    found = weakening(event_type, data, ctx.protective_tags.patterns(tc.tenant))
    if found is None:
        return False
    if not may_weaken(tc.principal):
        target = f"{data['urn']}|{data['tag']}"
        audit.record(ctx, tc.tenant, tc.principal, action, target, audit.REFUSED, counts={"pii": 1})
        field = found.field.removeprefix("data/")
        raise Problem(403, "pii-grant-required", f"{field}: {found.reason}", field=field)
    return True


def _publish_tag(tc: TenantContext, publisher: PublisherDep, event_type: str, data: dict[str, Any]) -> TagAccepted:
    try:
        event = new_event(event_type, tc.tenant, data, source=f"/tenants/{tc.tenant}/api")
    except InvalidData as exc:
        raise Problem(422, "invalid-request", str(exc), field=exc.field) from None
    publisher.publish(event)
    return TagAccepted(event_id=event.id, type=event_type, urn=data["urn"], tag=data["tag"], version=data["version"])


@router.post("/tags", status_code=202, summary="Tag an asset", response_model=TagAccepted, responses=_PUBLISH_ERRORS)
def add_tag(tc: TagWriter, ctx: ContextDep, publisher: PublisherDep, body: TagChange) -> TagAccepted:
    """Publish ``io.metalake.classification.added.v1`` (source ``human``, actor: the caller). 202 once Kafka
    confirmed it; the asset shows the tag as soon as the streaming job applied it (seconds)."""
    wanted = {
        "urn": body.urn,
        "tag": body.tag,
        "propagate": body.propagate,
        "restrict_propagation_through_lineage": body.restrict_propagation_through_lineage,
        "remove_propagations_on_entity_delete": body.remove_propagations_on_entity_delete,
    }
    pii = _guard_pii(tc, ctx, ADDED, wanted, "asset.tag.add")
    catalog = _catalog(ctx, tc.tenant)
    _live_asset(catalog, body.urn)
    data = {
        "urn": body.urn,
        "version": _next_version(publisher, catalog.classification(body.urn, body.tag)),
        "tag": body.tag,
        "source": "human",
        "propagate": body.propagate,
        "restrict_propagation_through_lineage": body.restrict_propagation_through_lineage,
        "remove_propagations_on_entity_delete": body.remove_propagations_on_entity_delete,
        "actor": tc.principal.subject,
    }
    accepted = _publish_tag(tc, publisher, ADDED, data)
    counts = {"pii": 1} if pii else None
    audit.record(ctx, tc.tenant, tc.principal, "asset.tag.add", f"{body.urn}|{body.tag}", audit.ACCEPTED, counts=counts)
    return accepted


@router.delete(
    "/tags",
    status_code=202,
    summary="Remove a tag from an asset",
    response_model=TagAccepted,
    responses=_PUBLISH_ERRORS,
)
def remove_tag(tc: TagWriter, ctx: ContextDep, publisher: PublisherDep, urn: UrnQuery, tag: TagQuery) -> TagAccepted:
    """Publish ``io.metalake.classification.removed.v1`` for a tag set on the asset itself (404 if it has none;
    a propagated tag is removed at its origin: 409). A PII tag (``access.pii_tags``) needs ``pii:read`` or
    ``tenant:admin`` too (403 ``pii-grant-required``)."""
    pii = _guard_pii(tc, ctx, REMOVED, {"urn": urn, "tag": tag}, "asset.tag.remove")
    catalog = _catalog(ctx, tc.tenant)
    held = catalog.classification(urn, tag)
    if held is None or held.get("deleted"):
        if any(t["tag"] == tag for t in catalog.propagated_of([urn]).get(urn, [])):
            raise Problem(409, "tag-propagated", "tag: propagated to this asset; remove it at its origin", field="tag")
        raise Problem(404, "not-found", "the asset has no such tag", field="tag")
    data = {"urn": urn, "version": _next_version(publisher, held), "tag": tag, "actor": tc.principal.subject}
    accepted = _publish_tag(tc, publisher, REMOVED, data)
    counts = {"pii": 1} if pii else None
    audit.record(ctx, tc.tenant, tc.principal, "asset.tag.remove", f"{urn}|{tag}", audit.ACCEPTED, counts=counts)
    return accepted


# -- edits ----------------------------------------------------------------------------------------------------------


def _edits_bound(api: ApiSettings) -> int:
    """The most live edits one asset holds: description, owners and its edited properties."""
    return 2 + api.edit_properties_max


def _check_edit(body: AssetEdit, api: ApiSettings) -> None:
    """The limits of ``api.edit_*`` (422 naming the field); the schema's own checks ran already."""
    if body.description is not None and len(body.description) > api.edit_description_max:
        raise Problem(
            422,
            "invalid-request",
            f"description: longer than {api.edit_description_max} characters",
            field="description",
        )
    if body.owners is not None:
        if len(body.owners) > api.edit_owners_max:
            raise Problem(422, "invalid-request", f"owners: more than {api.edit_owners_max}", field="owners")
        for i, owner in enumerate(body.owners):
            if not owner or len(owner) > api.edit_owner_max:
                field = f"owners.{i}"
                raise Problem(
                    422, "invalid-request", f"{field}: empty or longer than {api.edit_owner_max}", field=field
                )
    # As many clears as sets: replacing every edited property is one request.
    if body.properties is not None and len(body.properties) > 2 * api.edit_properties_max:
        detail = f"properties: more than {2 * api.edit_properties_max} in one request"
        raise Problem(422, "invalid-request", detail, field="properties")
    for name, value in (body.properties or {}).items():
        if not _PROPERTY_NAME.fullmatch(name):
            raise Problem(
                422,
                "invalid-request",
                f"properties: a property name must match {PROPERTY_NAME_PATTERN}",
                field="properties",
            )
        if value is not None and len(value) > api.edit_property_value_max:
            field = f"properties.{name}"
            raise Problem(
                422, "invalid-request", f"{field}: longer than {api.edit_property_value_max} characters", field=field
            )


def _wanted(body: AssetEdit, held: Mapping[str, AssetEditDoc]) -> dict[str, dict[str, Any] | None]:
    """What the body asks, per aspect: the edit's values, or None to clear. ``properties: null`` clears every
    property edit the asset holds."""
    given = body.model_fields_set
    out: dict[str, dict[str, Any] | None] = {}
    if "description" in given:
        out[EDITED_DESCRIPTION] = None if body.description is None else {"text": body.description}
    if "owners" in given:
        out[EDITED_OWNERS] = None if body.owners is None else {"owners": list(body.owners)}
    if "properties" in given:
        if body.properties is None:
            out.update(dict.fromkeys(a for a in held if a.startswith(EDITED_PROPERTY_PREFIX)))
        else:
            for name, value in body.properties.items():
                out[EDITED_PROPERTY_PREFIX + name] = None if value is None else {"text": value}
    return out


def _previous(aspect: str, shown: EditedAsset) -> dict[str, Any]:
    """What the asset showed for ``aspect`` before the change, as the event's ``previous_*`` field."""
    if aspect == EDITED_OWNERS:
        return {"previous_owners": shown["owners"]}
    if aspect == EDITED_DESCRIPTION:
        return {"previous_text": shown["description"]}
    return {"previous_text": (shown["properties"] or {}).get(aspect.removeprefix(EDITED_PROPERTY_PREFIX))}


def _unchanged(held: AssetEditDoc | None, values: dict[str, Any] | None) -> bool:
    """Whether the asset already holds this: a live edit with these values, or no live edit to clear."""
    live = held is not None and not held.get("deleted")
    if values is None:
        return not live
    return live and all(held.get(k) == v for k, v in values.items())  # type: ignore[union-attr]


@router.patch(
    "",
    status_code=202,
    summary="Edit an asset's description, owners or properties",
    response_model=EditsAccepted,
    responses={**_PUBLISH_ERRORS, 409: {"description": "Too many edited properties on this asset."}},
)
def edit_asset(tc: TagWriter, ctx: ContextDep, publisher: PublisherDep, body: AssetEdit) -> EditsAccepted:
    """Publish one ``io.metalake.asset.edited.v1`` (a value) or ``io.metalake.asset.edit.cleared.v1`` (``null``)
    per aspect that changes; each is audited (``asset.edit.<aspect kind>``, the target ``urn|aspect``) once Kafka
    confirmed it. 202 when all are in Kafka; the asset shows them as soon as the streaming job applied them
    (seconds). A person's value wins over the source's until cleared. On a 503 the aspects before the failed one
    are published: the same body again skips the aspects MongoDB already holds (the job applied them) only."""
    api = ctx.settings.api
    _check_edit(body, api)
    catalog = _catalog(ctx, tc.tenant)
    asset = _live_asset(catalog, body.urn)
    edits = catalog.edits_of(body.urn, _edits_bound(api))
    held = {e["aspect"]: e for e in edits}
    wanted = _wanted(body, held)
    if not wanted:
        raise Problem(422, "invalid-request", "body: nothing to edit (description, owners or properties)", field="body")
    for aspect in wanted.keys() - held.keys():
        cleared = catalog.edit(body.urn, aspect)  # one _id read each: at most 2 + 2 * edit_properties_max
        if cleared is not None:
            held[aspect] = cleared
    live_properties = {a for a, e in held.items() if a.startswith(EDITED_PROPERTY_PREFIX) and not e.get("deleted")}
    for aspect, values in wanted.items():
        if aspect.startswith(EDITED_PROPERTY_PREFIX):
            (live_properties.discard if values is None else live_properties.add)(aspect)
    if len(live_properties) > api.edit_properties_max:
        raise Problem(
            409, "too-many-properties", f"properties: more than {api.edit_properties_max} edited", field="properties"
        )
    shown = apply_edits(asset, edits)
    changes = []
    for aspect, values in sorted(wanted.items()):
        if _unchanged(held.get(aspect), values):
            continue
        event_type = CLEARED if values is None else EDITED
        data = {
            "urn": body.urn,
            "version": _next_version(publisher, held.get(aspect)),
            "aspect": aspect,
            **(values or {}),
            **_previous(aspect, shown),
            "actor": tc.principal.subject,
        }
        try:
            event = new_event(event_type, tc.tenant, data, source=f"/tenants/{tc.tenant}/api")
        except InvalidData as exc:
            raise Problem(422, "invalid-request", str(exc), field=exc.field) from None
        publisher.publish(event)
        kind = "property" if aspect.startswith(EDITED_PROPERTY_PREFIX) else aspect
        counts = {"cleared": int(values is None)}
        audit.record(
            ctx, tc.tenant, tc.principal, f"asset.edit.{kind}", f"{body.urn}|{aspect}", audit.ACCEPTED, counts=counts
        )
        changes.append(EditAccepted(aspect=aspect, event_id=event.id, type=event_type, version=data["version"]))
    return EditsAccepted(urn=body.urn, changes=changes)


@router.get("/lineage", summary="Lineage of an asset", response_model=LineageView, responses=_ERRORS)
def lineage(
    tc: TenantReader,
    ctx: ContextDep,
    urn: UrnQuery,
    direction: Direction = "downstream",
    depth: Annotated[int, Query(ge=1, le=MAX_DEPTH, description="Hops to follow.")] = DEFAULT_DEPTH,
    max_nodes: Annotated[int, Query(ge=1, le=MAX_NODES, description="Node budget.")] = DEFAULT_NODES,
) -> LineageView:
    """Assets up to ``depth`` hops upstream or downstream and the edges between them, breadth first (one query per
    level). ``truncated`` tells whether the depth or the node budget cut the graph; a node no live asset describes
    yet has a null ``name`` and ``kind``."""
    catalog = _catalog(ctx, tc.tenant)
    result = traverse(urn, direction, depth, max_nodes, catalog.edges_from)
    if not result.reached:
        _live_asset(catalog, urn)  # nothing around it: say whether the asset itself exists
    info = catalog.summaries(list(result.reached))
    nodes = [_node(u, d, info.get(u)) for u, d in sorted(result.reached.items(), key=lambda item: (item[1], item[0]))]
    edges = [
        LineageEdge(
            upstream=e["upstream"],
            urn=e["urn"],
            transformation=e.get("transformation"),
            blocked_tags=e.get("blocked_tags"),
            propagation=e.get("propagation"),
        )
        for e in result.edges
    ]
    return LineageView(
        urn=urn,
        direction=direction,
        depth=depth,
        nodes=nodes,
        edges=edges,
        truncated=result.truncated,
        reason=result.reason,
    )


@router.get("/incidents", summary="Incidents", response_model=Page[IncidentView], responses=_LIST_ERRORS)
def incidents(
    tc: TenantReader,
    ctx: ContextDep,
    urn: Annotated[
        str | None, Query(min_length=1, max_length=URN_MAX, description="One asset; all if omitted."), CanonicalOrNone
    ] = None,
    state: Annotated[Literal["open", "resolved", "all"], Query(description="open: not resolved.")] = "all",
    limit: Limit = DEFAULT_LIMIT,
    cursor: CursorParam = None,
) -> Page[IncidentView]:
    """Monte Carlo incidents on the tenant's assets (one per incident and affected asset), by incident id."""
    resume = decode_cursor("incidents", cursor, 1)
    docs, more = _catalog(ctx, tc.tenant).incidents(urn=urn, state=state, resume_after=resume, limit=limit)
    items = [IncidentView.model_validate(_public(d)) for d in docs]
    next_cursor = encode_cursor("incidents", [docs[-1]["_id"]]) if more and docs else None
    return Page[IncidentView](items=items, next_cursor=next_cursor)
