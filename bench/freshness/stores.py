"""How each store is asked whether the sampled events are visible: the tenant's MongoDB projection (the database the
API and the processors read) by the document's key, and Trino through the tenant's own views, as a BI user would
query them, all due lookups in one query."""

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


def union_sql(probes: list[Probe], schemas: dict[str, str]) -> tuple[str, list[Any]]:
    """One query for every probe: row ``i`` comes back when probe ``i`` is visible. The probes of one tenant, view and
    condition are one join of their values with the view (one scan of it, not one per probe). Schemas and table names
    come from the bench's constants and the tenants' validated ids; the values are parameters."""
    groups: dict[tuple[str, str, str], list[int]] = {}
    for i, p in enumerate(probes):
        groups.setdefault((p.tenant, p.trino.table, p.trino.where), []).append(i)
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
        sql, params = union_sql(probes, schemas)
        cursor.execute(sql, params)
        return {id(probes[int(row[0])]) for row in cursor.fetchall()}

    return look
