"""An asset's health, derived from its incidents: degraded while any incident on it is open, healthy otherwise.

Computed by the job after a batch's incidents MERGE, from the incidents *table* (not the batch's events): so a
duplicate or out-of-order incident event, already ruled by the incidents' own version guard, cannot skew it, and a
resolution clears the health only when no other incident on the asset is still open. Pure Python here; the job reads
the incident rows and writes the result (``lake`` for Delta, ``projector`` for MongoDB).

The result is version-guarded by ``(health_version, health_event_id)``: the newest ``(version, event_id)`` among the
asset's incident rows. Incident rows only ever move to newer versions, so a health computed later never carries an
older pair; a write applies when its pair is at least the held one. Equal pairs are a replay, or a change to an
incident older than the newest one: the job's health lock (``IncidentIndex.lock``) orders those computations.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any

from catalog.projection import ASSETS_COLLECTION
from processors.enrichment.state import StateSpec

HEALTHY = "healthy"
DEGRADED = "degraded"
RESOLVED = "resolved"

HEALTH_FIELDS = ("health", "health_severity", "open_incidents", "open_incident_ids")
HEALTH_COLUMNS = (*HEALTH_FIELDS, "health_version", "health_event_id", "health_updated_at")
# The incident columns the computation reads.
INCIDENT_COLUMNS = ("urn", "incident_id", "status", "severity", "deleted", "version", "event_id")

# What a new asset row starts with (Delta insert, MongoDB $setOnInsert): no incident seen yet. Its health_version
# stays null, so the first computed health always applies. No empty open_incident_ids: FerretDB drops an empty array
# from $setOnInsert (measured), and MongoDB and Delta must agree; the list is null until the first computation.
INSERT_DEFAULTS: Mapping[str, Any] = {"health": HEALTHY, "open_incidents": 0}

# The assets' health as a kind of state for the changes topic (table "asset_health", key urn): not in STATE_SPECS,
# as no event feeds it directly.
HEALTH = StateSpec(table="asset_health", collection=ASSETS_COLLECTION, key=("urn",), types={}, fields=HEALTH_FIELDS)

_SEVERITY = re.compile(r"sev[-_ ]?(\d+)", re.IGNORECASE)


def severity_rank(severity: str | None) -> tuple[int, int, str]:
    """Sort key, worst first: Monte Carlo's SEV-1 before SEV-2 ... SEV-4, then any other declared value, then none."""
    if severity is None:
        return (2, 0, "")
    match = _SEVERITY.fullmatch(severity.strip())
    if match:
        return (0, int(match.group(1)), "")
    return (1, 0, severity)


def worst_severity(severities: Iterable[str | None]) -> str | None:
    return min(severities, key=severity_rank, default=None)


def is_open(incident: Mapping[str, Any]) -> bool:
    return not incident.get("deleted") and incident.get("status") != RESOLVED


def _newest(rows: list[Mapping[str, Any]]) -> Mapping[str, Any]:
    return max(rows, key=lambda r: (r.get("version") or 0, r.get("event_id") or ""))


def asset_health(incidents: Iterable[Mapping[str, Any]], now: datetime) -> list[dict[str, Any]]:
    """One health row (keys: ``urn`` and ``HEALTH_COLUMNS``) per asset among ``incidents`` (rows of the incidents
    table with ``INCIDENT_COLUMNS``: all of an asset's rows, resolved ones included, or the version is wrong)."""
    by_urn: dict[str, list[Mapping[str, Any]]] = {}
    for row in incidents:
        by_urn.setdefault(str(row["urn"]), []).append(row)
    out = []
    for urn in sorted(by_urn):
        rows = by_urn[urn]
        opened = [r for r in rows if is_open(r)]
        newest = _newest(rows)
        out.append(
            {
                "urn": urn,
                "health": DEGRADED if opened else HEALTHY,
                "health_severity": worst_severity(r.get("severity") for r in opened),
                "open_incidents": len(opened),
                "open_incident_ids": sorted(str(r["incident_id"]) for r in opened),
                "health_version": newest.get("version") or 0,
                "health_event_id": newest.get("event_id") or "",
                "health_updated_at": now,
            }
        )
    return out


def mongo_health_update(row: Mapping[str, Any]) -> dict[str, Any]:
    """An ``update`` statement setting the health of an existing asset document, if not newer there already.

    No upsert: an asset MongoDB does not hold yet gets its health when its own upsert arrives (the job computes it
    again for every asset of a batch that has incident rows)."""
    version, event_id = row["health_version"], row["health_event_id"]
    not_newer = {
        "$or": [
            {"health_version": None},
            {"health_version": {"$lt": version}},
            {"health_version": version, "health_event_id": {"$lte": event_id}},
        ]
    }
    return {
        "q": {"_id": row["urn"], **not_newer},
        "u": {"$set": {c: row[c] for c in HEALTH_COLUMNS}},
        "upsert": False,
    }


def change_rows(rows: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Health rows shaped as state rows of ``HEALTH`` for ``changes.change_events`` (version: health_version)."""
    return [
        {
            "urn": r["urn"],
            **{c: r[c] for c in HEALTH_FIELDS},
            "deleted": False,
            "version": r["health_version"],
            "event_id": r["health_event_id"],
        }
        for r in rows
    ]


class IncidentIndex:
    """Which URNs have incident rows, per tenant, and the lock of the health step; one per job process, shared by its
    queries. With it a batch of asset upserts reads the incidents table only for the assets that have incidents,
    not for every asset (a bulk batch holds thousands of columns). Loaded from the table once per tenant, then kept
    up to date by each batch's incidents under ``lock``, before the health MERGE of the batch that adds them."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._urns: dict[str, set[str]] = {}

    def loaded(self, tenant: str) -> bool:
        return tenant in self._urns

    def load(self, tenant: str, urns: Iterable[str]) -> None:
        self._urns[tenant] = set(urns)

    def to_compute(self, tenant: str, incident_urns: Iterable[str], asset_urns: Iterable[str]) -> list[str]:
        """Record the batch's incident URNs; return them with the batch's assets that have incident rows, sorted."""
        known = self._urns.setdefault(tenant, set())
        incidents = set(incident_urns)
        known |= incidents
        return sorted(incidents | (set(asset_urns) & known))
