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


def _versioned(key: dict[str, Any], version: int) -> dict[str, Any]:
    return {**key, "version": {"$gte": version}}


def asset(tenant: str, acked: float, data: dict[str, Any]) -> Probe:
    urn, v = data["urn"], int(data["version"])
    return Probe(
        "assets",
        tenant,
        acked,
        MongoLook("assets", _versioned({"_id": urn}, v)),
        TrinoLook("assets", "t.urn = {} AND t.version >= {}", (urn, v)),
    )


def tag(tenant: str, acked: float, urn: str, tag_: str, version: int | None) -> Probe:
    """A tag set on the asset itself: a person's (with its version) or the job's own PII tag (a new column: any)."""
    where, params = "t.urn = {} AND t.tag = {}", (urn, tag_)
    key: dict[str, Any] = {"_id": f"{urn}|{tag_}"}
    if version is not None:
        where, params, key = where + " AND t.version >= {}", (*params, version), _versioned(key, version)
    mongo, trino = MongoLook("classifications", key), TrinoLook("classifications", where, params)
    return Probe("classifications", tenant, acked, mongo, trino)


def propagated(tenant: str, acked: float, urn: str) -> Probe:
    """The PII tag propagation carries to ``urn`` along the new lineage edge."""
    return Probe(
        "propagated_tags",
        tenant,
        acked,
        MongoLook("propagated_tags", {"urn": urn, "tag": PII, "deleted": False}),
        TrinoLook("propagated_tags", "t.urn = {} AND t.tag = {} AND NOT t.deleted", (urn, PII)),
    )


def edge(tenant: str, acked: float, data: dict[str, Any]) -> Probe:
    urn, up, v = data["urn"], data["upstream"], int(data["version"])
    return Probe(
        "lineage",
        tenant,
        acked,
        MongoLook("lineage", _versioned({"_id": f"{up}|{urn}"}, v)),
        TrinoLook("lineage_edges", "t.upstream = {} AND t.urn = {} AND t.version >= {}", (up, urn, v)),
    )


def edit(tenant: str, acked: float, urn: str, aspect: str, version: int) -> Probe:
    return Probe(
        "edits",
        tenant,
        acked,
        MongoLook("asset_edits", _versioned({"_id": f"{urn}|{aspect}"}, version)),
        TrinoLook("asset_edits", "t.urn = {} AND t.aspect = {} AND t.version >= {}", (urn, aspect, version)),
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
        yield asset(tenant, acked, data)
        if data.get("kind") == "column" and data.get("name") in PII_COLUMNS and "description" not in data:
            yield tag(tenant, acked, data["urn"], PII, None)  # a new column (updates carry a description)
    elif event["type"] == TAGGED:
        yield tag(tenant, acked, data["urn"], data["tag"], int(data["version"]))
    elif event["type"] == EDGE:
        yield edge(tenant, acked, data)
        yield propagated(tenant, acked, data["urn"])
