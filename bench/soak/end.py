"""After the load: the drain (until Delta holds every accepted event, every consumer group is caught up and the
deliveries stopped growing, or ``--drain-timeout``), then the checks per event id, read from the stores themselves."""

from __future__ import annotations

import time
from typing import Any

from metalake.mongo import mongo_client
from metalake.trino_connect import connect as trino_connect
from soak import changes, prom, verify
from soak.run import Run, say

DRAIN_POLL_S = 15.0


def _distinct_in_delta(cursor: Any, tenants: list[str]) -> int:
    where = f"tenant_id IN ({verify.in_list(tenants)}) AND source = '{verify.SOURCE}'"
    sql = f"SELECT count(DISTINCT event_id) FROM {verify.POOLED}.events WHERE {where}"  # noqa: S608 - checked ids
    return int(verify.rows(cursor, sql)[0][0])


def drain(run: Run, cursor: Any) -> dict[str, Any]:
    """Poll until settled; what it waited for and how long."""
    started, ids = time.time(), [t.id for t in run.fleet.tenants]
    deadline = started + run.args.drain_timeout
    last_deliveries, settled = -1, False
    while time.time() < deadline and not settled:
        time.sleep(DRAIN_POLL_S)
        in_delta, lag = _distinct_in_delta(cursor, ids), prom.lag_now(run.prometheus)
        deliveries, down = run.receiver.counts.total(), prom.down_now(run.prometheus)
        settled = in_delta >= run.load.tally.accepted and not down and lag == 0 and deliveries == last_deliveries
        say(f"drain: {in_delta}/{run.load.tally.accepted} in Delta, lag {lag}, {deliveries} deliveries, down {down}")
        last_deliveries = deliveries
    return {"seconds": round(time.time() - started), "settled": settled}


def checks(run: Run) -> dict[str, Any]:
    cursor = trino_connect(run.settings, user="bench").cursor()
    drained = drain(run, cursor)
    tally, ids = run.load.tally, [t.id for t in run.fleet.tenants]
    accepted = {i for per in tally.ids.values() for i in per}
    say("checking Delta's history per event id")
    history = verify.history_check(verify.delta_history(cursor, ids), accepted, tally.ambiguous)
    delta_state, mongo_state = _states(run, cursor)
    sent_incidents = {i for per in tally.incidents.values() for i in per}
    incidents = verify.incidents_check(verify.delta_incidents(cursor, ids), sent_incidents)
    say("reading metalake.changes for what outbound had to deliver")
    expected = changes.expected_changes(run.settings, ids, int(run.t0 * 1000))
    deliveries = verify.deliveries_check(run.receiver.counts.by_change, expected)
    deliveries["rejected_signatures"] = run.receiver.counts.rejected
    return {
        "drain": drained,
        "delta_history": history,
        "delta_current": delta_state,
        "mongodb_current": mongo_state,
        "incidents_delta": incidents,
        "deliveries": deliveries,
    }


def _states(run: Run, cursor: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Each tenant's assets in Delta and MongoDB against the newest the bench sent, summed over the tenants."""
    say("checking the current state of every asset in Delta and MongoDB")
    mongo = mongo_client(run.settings)
    totals: dict[str, dict[str, Any]] = {"delta": {}, "mongodb": {}}
    try:
        for t in run.fleet.tenants:
            newest = run.load.catalogs[t.id].newest
            found = {
                "delta": verify.delta_states(cursor, t.id),
                "mongodb": verify.mongo_states(mongo, t.id, run.settings.lake_root),
            }
            for store, states in found.items():
                _add(totals[store], verify.state_check(states, newest))
    finally:
        mongo.close()
    return totals["delta"], totals["mongodb"]


def _add(total: dict[str, Any], one: dict[str, Any]) -> None:
    for key, value in one.items():
        if key == "examples":
            total[key] = (total.get(key, []) + value)[:5]
        else:
            total[key] = total.get(key, 0) + value
