"""How each store is asked whether the sampled events are visible: the tenant's MongoDB projection (the database the
API and the processors read) by the document's key, and Trino through the tenant's own views, as a BI user would
query them, all due lookups in as few queries as Trino takes (one per ``MAX_JOINS`` tenant, view and condition)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pymongo import MongoClient

from freshness.probes import Probe
from ops.settings import Settings
from tenants.naming import names_for
from tenants.trino_schemas import trino_schema


def mongo_look(mongo: MongoClient[dict[str, Any]], settings: Settings) -> Callable[[list[Probe]], set[int]]:
    databases: dict[str, str] = {}

    def look(probes: list[Probe]) -> set[int]:
        found = set()
        for p in probes:
            db = databases.setdefault(p.tenant, names_for(p.tenant, settings.lake_root).mongo_database)
            if mongo[db][p.mongo.collection].find_one(p.mongo.filter, {"_id": 1}) is not None:
                found.add(id(p))
        return found

    return look


# Trino refuses a query of over 150 stages (QUERY_HAS_TOO_MANY_STAGES): 50 tenants' due probes in one UNION ALL made
# 262. A join of values with a view is about three stages.
MAX_JOINS = 40


def _group(probe: Probe) -> tuple[str, str, str]:
    return (probe.tenant, probe.trino.table, probe.trino.where)


def batches(probes: list[Probe], max_joins: int = MAX_JOINS) -> list[list[Probe]]:
    """The probes split so that each batch holds at most ``max_joins`` tenant, view and condition groups (one join
    each in ``union_sql``); a group is never split."""
    groups: dict[tuple[str, str, str], list[Probe]] = {}
    for p in probes:
        groups.setdefault(_group(p), []).append(p)
    members = list(groups.values())
    return [[p for g in members[k : k + max_joins] for p in g] for k in range(0, len(members), max_joins)]


def union_sql(probes: list[Probe], schemas: dict[str, str]) -> tuple[str, list[Any]]:
    """One query for every probe: row ``i`` comes back when probe ``i`` is visible. The probes of one tenant, view and
    condition are one join of their values with the view (one scan of it, not one per probe). Schemas and table names
    come from the bench's constants and the tenants' validated ids; the values are parameters."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, p in enumerate(probes):
        groups.setdefault(_group(p), []).append(i)
    parts: list[str] = []
    params: list[Any] = []
    for (tenant, table, where), members in groups.items():
        width = len(probes[members[0]].trino.params)
        values = ", ".join("(" + ", ".join([str(i)] + ["?"] * width) + ")" for i in members)
        columns = ", ".join(["i"] + [f"c{n}" for n in range(width)])
        on = where.format(*(f"p.c{n}" for n in range(width)))
        view = f'"{schemas[tenant]}"."{table}"'
        parts.append(f"SELECT DISTINCT p.i FROM (VALUES {values}) AS p({columns}) JOIN {view} t ON {on}")  # noqa: S608
        params.extend(v for i in members for v in probes[i].trino.params)
    return " UNION ALL ".join(parts), params


def trino_look(cursor: Any, settings: Settings) -> Callable[[list[Probe]], set[int]]:
    schemas: dict[str, str] = {}

    def look(probes: list[Probe]) -> set[int]:
        for p in probes:
            schemas.setdefault(p.tenant, trino_schema(settings, p.tenant))
        found: set[int] = set()
        for batch in batches(probes):
            sql, params = union_sql(batch, schemas)
            cursor.execute(sql, params)
            found |= {id(batch[int(row[0])]) for row in cursor.fetchall()}
        return found

    return look
