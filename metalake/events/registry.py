"""Known event types: their JSON Schema and the topic class (priority or bulk) their events travel on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any, Literal

TopicClass = Literal["priority", "bulk"]


class UnknownEventType(LookupError):
    """An event type metalake has no schema for."""


@dataclass(frozen=True)
class EventTypeSpec:
    name: str
    summary: str
    # Columns are ~90% of an estate: they ride the bulk topic so tables are never stuck behind them.
    bulk_kinds: frozenset[str] = frozenset()

    def topic_class(self, data: Mapping[str, Any]) -> TopicClass:
        return "bulk" if data.get("kind") in self.bulk_kinds else "priority"

    @property
    def schema(self) -> dict[str, Any]:
        return _load_schema(self.name)


_SPECS: tuple[EventTypeSpec, ...] = (
    EventTypeSpec("io.metalake.asset.upserted.v1", "An asset's current state", frozenset({"column"})),
    EventTypeSpec("io.metalake.asset.deleted.v1", "An asset is gone (versioned tombstone)"),
    EventTypeSpec("io.metalake.classification.added.v1", "A tag was put on an asset"),
    EventTypeSpec("io.metalake.classification.removed.v1", "A tag was taken off an asset"),
    EventTypeSpec("io.metalake.lineage.edge.added.v1", "Data flows from one asset into another"),
    EventTypeSpec("io.metalake.lineage.edge.removed.v1", "A lineage edge is gone"),
    # Monte Carlo incidents, one event per affected table (connectors.montecarlo).
    EventTypeSpec("com.montecarlodata.incident.opened.v1", "Monte Carlo opened an incident on a table"),
    EventTypeSpec("com.montecarlodata.incident.updated.v1", "An alert update on a Monte Carlo incident"),
    EventTypeSpec("com.montecarlodata.incident.resolved.v1", "A Monte Carlo incident was resolved"),
    # Propagation (processors.propagation): tags that travelled along lineage, back into the pipeline.
    EventTypeSpec("io.metalake.classification.propagated.v1", "A tag reached an asset along lineage"),
    EventTypeSpec("io.metalake.classification.unpropagated.v1", "A propagated tag no longer reaches an asset"),
    # Published to metalake.changes (not an event topic) after each propagation run; registered for its schema.
    EventTypeSpec("io.metalake.propagation.completed.v1", "A propagation run of one (origin, tag) is published"),
    # Published to metalake.changes by a GDPR erase (processors.lake.erase); carries the URN's sha256, not the URN.
    EventTypeSpec("io.metalake.asset.erased.v1", "A GDPR erase of one asset completed"),
    # Published to metalake.changes by the streaming job, one per state row written (catalog.changes).
    EventTypeSpec("io.metalake.state.changed.v1", "A row of a tenant's current state was written"),
    # Published to metalake.outbound.tests by the admin API, consumed by the outbound runtime (control.subscriptions).
    EventTypeSpec("io.metalake.subscription.test.requested.v1", "A test message to one outbound subscription"),
    # A person's edits through the API (api.routes.assets), kept apart from the sources' values (state asset_edits).
    EventTypeSpec("io.metalake.asset.edited.v1", "A person set the description, owners or a property of an asset"),
    EventTypeSpec("io.metalake.asset.edit.cleared.v1", "A person cleared an edit: the source's value shows again"),
)
_BY_NAME = {spec.name: spec for spec in _SPECS}


def event_types() -> tuple[EventTypeSpec, ...]:
    return _SPECS


def spec_for(event_type: str) -> EventTypeSpec:
    try:
        return _BY_NAME[event_type]
    except KeyError:
        raise UnknownEventType(f"unknown event type {event_type!r}") from None


@cache
def _load_schema(name: str) -> dict[str, Any]:
    text = resources.files("metalake.events").joinpath("schemas", f"{name}.json").read_text("utf-8")
    schema: dict[str, Any] = json.loads(text)
    return schema
