"""What to look for, per event the load had acknowledged: the document in the tenant's MongoDB projection the product
reads, and the row of the tenant's Trino view a BI user would query, for each table kind. Pure: no I/O here.

A later event may replace the row an event wrote (a newer version of the asset), so a row counts when its version is
the event's or newer. A Trino condition is SQL on the view (as ``t``) with a ``{}`` per value: the lookups of one
tenant, view and condition are asked together (``stores.union_sql``), each value a parameter."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from soak.catalog import EDGE, PII_COLUMNS, SCHEMA, TAGGED, UPSERT

from metalake.urn import asset_urn
from ops.demo.catalog import DB

KINDS = ("assets", "classifications", "propagated_tags", "lineage", "incidents", "health", "edits")
STORES = ("mongodb", "trino")
PII = "PII"  # the tag the job puts on columns named like personal data (docs/propagation.md)


@dataclass(frozen=True)
class MongoLook:
    collection: str
    filter: dict[str, Any]


@dataclass(frozen=True)
class TrinoLook:
    table: str  # the tenant's view (its Trino schema's table of that name)
    where: str  # on the view as ``t``: a ``{}`` where each value goes
    params: tuple[Any, ...]


@dataclass
class Probe:
    """One sampled event of one kind; ``seen`` maps a store to the seconds from Kafka's acknowledgement."""

    kind: str
    tenant: str
    acked: float  # time.monotonic() of the 2xx
    mongo: MongoLook
    trino: TrinoLook
    seen: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class State:
    """A kind of current state: its MongoDB collection, its Trino view and the fields of its key (the document's
    ``_id`` is their values joined by ``|``, catalog.projection)."""

    kind: str
    collection: str
    view: str
    key: tuple[str, ...]


ASSETS = State("assets", "assets", "assets", ("urn",))
TAGS = State("classifications", "classifications", "classifications", ("urn", "tag"))
EDGES = State("lineage", "lineage", "lineage_edges", ("upstream", "urn"))
EDITS = State("edits", "asset_edits", "asset_edits", ("urn", "aspect"))


def keyed(state: State, tenant: str, acked: float, values: dict[str, Any], version: int | None) -> Probe:
    """The row of ``state`` whose key is in ``values``, at ``version`` or newer (any version when None: the job's
    own PII tag of a new column, whose version the bench does not know)."""
    ids: tuple[Any, ...] = tuple(str(values[k]) for k in state.key)
    mongo: dict[str, Any] = {"_id": "|".join(ids)}
    where, params = " AND ".join(f"t.{k} = {{}}" for k in state.key), ids
    if version is not None:
        mongo["version"] = {"$gte": version}
        where, params = where + " AND t.version >= {}", (*ids, version)
    return Probe(state.kind, tenant, acked, MongoLook(state.collection, mongo), TrinoLook(state.view, where, params))


def propagated(tenant: str, acked: float, urn: str) -> Probe:
    """The PII tag propagation carries to ``urn`` along the new lineage edge."""
    return Probe(
        "propagated_tags",
        tenant,
        acked,
        MongoLook("propagated_tags", {"urn": urn, "tag": PII, "deleted": False}),
        TrinoLook("propagated_tags", "t.urn = {} AND t.tag = {} AND NOT t.deleted", (urn, PII)),
    )


def incident(tenant: str, acked: float, body: bytes) -> list[Probe]:
    """A Monte Carlo incident: its row, and the health it gives the table it names (the table's open incidents)."""
    payload = json.loads(body)["payload"]
    iid, table = payload["incident_id"], payload["event_list"][0]["table_name"]
    urn = asset_urn(*DB, SCHEMA, table)
    return [
        Probe(
            "incidents",
            tenant,
            acked,
            MongoLook("incidents", {"incident_id": iid}),
            TrinoLook("incidents", "t.incident_id = {}", (iid,)),
        ),
        Probe(
            "health",
            tenant,
            acked,
            MongoLook("assets", {"_id": urn, "open_incident_ids": iid}),
            TrinoLook("assets", "t.urn = {} AND contains(t.open_incident_ids, {})", (urn, iid)),
        ),
    ]


def of_event(tenant: str, acked: float, event: dict[str, Any]) -> Iterator[Probe]:
    """The probes one accepted ingest event gives (none for a kind the benchmark does not time)."""
    data = event["data"]
    if event["type"] == UPSERT:
        yield keyed(ASSETS, tenant, acked, data, int(data["version"]))
        if data.get("kind") == "column" and data.get("name") in PII_COLUMNS and "description" not in data:
            yield keyed(TAGS, tenant, acked, {"urn": data["urn"], "tag": PII}, None)  # new (updates say more)
    elif event["type"] == TAGGED:
        yield keyed(TAGS, tenant, acked, data, int(data["version"]))
    elif event["type"] == EDGE:
        yield keyed(EDGES, tenant, acked, data, int(data["version"]))
        yield propagated(tenant, acked, data["urn"])
