"""At the end of the soak, per event id: the ingest API's accepted events in Delta's history (the pooled ``events``
table, through Trino) exactly once; every asset's newest (version, event id) in Delta's current state (``assets``)
and in MongoDB (the tenant's ``assets`` collection); every accepted Monte Carlo incident in Delta's ``incidents``;
every change the subscriptions take delivered to the receiver exactly once."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from pymongo import MongoClient

from soak.catalog import SOURCE, table_urn
from tenants.naming import names_for

POOLED = 'lake."_pooled"'


def in_list(tenants: Iterable[str]) -> str:
    """The ids as a SQL list; each checked to be a tenant id first (no quote can pass)."""
    ids = list(tenants)
    assert all(t.replace("-", "").isalnum() for t in ids)  # tenant ids: [a-z][a-z0-9-]
    return ", ".join(f"'{t}'" for t in ids)


def rows(cursor: Any, sql: str) -> list[tuple[Any, ...]]:
    cursor.execute(sql)
    out: list[tuple[Any, ...]] = []
    while batch := cursor.fetchmany(50_000):
        out.extend(tuple(r) for r in batch)
    return out


def delta_history(cursor: Any, tenants: Iterable[str]) -> Counter[str]:
    """Event id -> rows in ``events``, for the events the bench sent (its source)."""
    # Tenant ids are checked ([a-z0-9-]) and the rest are the bench\'s constants.
    where = f"tenant_id IN ({in_list(tenants)}) AND source = '{SOURCE}'"
    sql = f"SELECT event_id, count(*) FROM {POOLED}.events WHERE {where}"  # noqa: S608 - checked ids, constants
    return Counter({str(r[0]): int(r[1]) for r in rows(cursor, sql + " GROUP BY event_id")})


def history_check(found: Counter[str], accepted: set[str], ambiguous: set[str]) -> dict[str, Any]:
    doubled = {i for i, n in found.items() if n > 1}
    return {
        "accepted": len(accepted),
        "rows": sum(found.values()),
        "distinct": len(found),
        "lost": len(accepted - found.keys()),
        "lost_examples": sorted(accepted - found.keys())[:5],
        "duplicated": len(doubled),
        "duplicated_after_client_resend": len(doubled & ambiguous),
        "duplicated_examples": sorted(doubled - ambiguous)[:5],
        "unexpected": len(found.keys() - accepted - ambiguous),
    }


def state_check(found: Mapping[str, tuple[int, str]], newest: Mapping[str, tuple[int, str]]) -> dict[str, Any]:
    """The store's (version, event id) of each asset the bench sent against the newest it sent."""
    missing = [u for u in newest if u not in found]
    stale = [u for u in newest if u in found and found[u] != newest[u]]
    return {"assets": len(newest), "missing": len(missing), "stale": len(stale), "examples": (missing + stale)[:5]}


def delta_states(cursor: Any, tenant: str) -> dict[str, tuple[int, str]]:
    prefix = table_urn(0).rsplit("/", 1)[0]
    where = f"tenant_id IN ({in_list([tenant])}) AND urn LIKE '{prefix}/%'"
    sql = f"SELECT urn, version, event_id FROM {POOLED}.assets WHERE {where}"  # noqa: S608 - checked id, constants
    return {str(r[0]): (int(r[1]), str(r[2])) for r in rows(cursor, sql)}


def mongo_states(mongo: MongoClient[dict[str, Any]], tenant: str, lake_root: Any) -> dict[str, tuple[int, str]]:
    prefix = table_urn(0).rsplit("/", 1)[0] + "/"
    docs = mongo[names_for(tenant, lake_root).mongo_database]["assets"].find({}, {"version": 1, "event_id": 1})
    return {d["_id"]: (int(d["version"]), str(d["event_id"])) for d in docs if str(d["_id"]).startswith(prefix)}


def delta_incidents(cursor: Any, tenants: Iterable[str]) -> Counter[str]:
    # Tenant ids are checked ([a-z0-9-]) and the rest are the bench\'s constants.
    sql = f"SELECT incident_id, count(*) FROM {POOLED}.incidents WHERE tenant_id IN ({in_list(tenants)})"  # noqa: S608
    return Counter({str(r[0]): int(r[1]) for r in rows(cursor, sql + " GROUP BY incident_id")})


def incidents_check(found: Counter[str], sent: set[str]) -> dict[str, Any]:
    return {
        "accepted": len(sent),
        "lost": len(sent - found.keys()),
        "duplicated": sum(1 for i in sent if found.get(i, 0) > 1),
    }


def deliveries_check(received: Counter[str], expected: Mapping[str, str]) -> dict[str, Any]:
    got = set(received)
    doubled = [c for c in expected if received.get(c, 0) > 1]
    return {
        "expected": len(expected),
        "delivered": len(got & expected.keys()),
        "lost": len(expected.keys() - got),
        "lost_examples": sorted(expected.keys() - got)[:5],
        "duplicated": len(doubled),
        "duplicate_receipts": sum(received[c] - 1 for c in doubled),
        "from_before_the_run": len(got - expected.keys()),
    }
