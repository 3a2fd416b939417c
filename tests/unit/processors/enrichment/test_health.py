"""An asset's health from its incident rows: open incidents degrade it, resolution clears only the last one."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from processors.enrichment.changes import change_events
from processors.enrichment.health import (
    DEGRADED,
    HEALTH,
    HEALTH_COLUMNS,
    HEALTHY,
    IncidentIndex,
    asset_health,
    change_rows,
    mongo_health_update,
    severity_rank,
    worst_severity,
)
from processors.enrichment.projection import spec_upsert
from processors.enrichment.state import ASSETS, CLASSIFICATIONS, META

NOW = datetime(2026, 11, 22, tzinfo=UTC)
TABLE = "urn:metalake:snowflake:acme/zeus/ares/artemis"
OTHER = "urn:metalake:snowflake:acme/zeus/ares/apollo"


def _incident(
    incident_id: str, status: str, version: int, severity: str | None = None, urn: str = TABLE
) -> dict[str, Any]:
    return {
        "urn": urn,
        "incident_id": incident_id,
        "status": status,
        "severity": severity,
        "deleted": False,
        "version": version,
        "event_id": f"e-{incident_id}-{version}",
    }


def test_two_overlapping_incidents_degrade_until_both_are_resolved() -> None:
    a_open, b_open = _incident("a", "opened", 10, "SEV-3"), _incident("b", "updated", 12, "SEV-1")
    [both] = asset_health([a_open, b_open], NOW)
    assert (both["health"], both["health_severity"], both["open_incidents"], both["open_incident_ids"]) == (
        DEGRADED,
        "SEV-1",
        2,
        ["a", "b"],
    )
    assert (both["health_version"], both["health_event_id"]) == (12, "e-b-12")

    # Resolving one leaves the other open: still degraded, at the remaining incident's severity.
    [one] = asset_health([a_open, _incident("b", "resolved", 13, "SEV-1")], NOW)
    assert (one["health"], one["health_severity"], one["open_incident_ids"]) == (DEGRADED, "SEV-3", ["a"])

    [none] = asset_health([_incident("a", "resolved", 14), _incident("b", "resolved", 13)], NOW)
    assert (none["health"], none["health_severity"], none["open_incidents"], none["open_incident_ids"]) == (
        HEALTHY,
        None,
        0,
        [],
    )
    assert (none["health_version"], none["health_event_id"]) == (14, "e-a-14")


def test_the_health_version_is_the_newest_incident_row_whatever_its_status() -> None:
    # A resolution arriving with an older version than another incident's update does not lower the version.
    [row] = asset_health([_incident("a", "opened", 20), _incident("b", "resolved", 5)], NOW)
    assert (row["health"], row["health_version"], row["open_incident_ids"]) == (DEGRADED, 20, ["a"])


def test_one_row_per_asset_and_tombstoned_incidents_are_not_open() -> None:
    rows = asset_health(
        [
            _incident("a", "opened", 1),
            {**_incident("b", "opened", 2), "deleted": True},
            _incident("c", "opened", 3, urn=OTHER),
        ],
        NOW,
    )
    assert [(r["urn"], r["open_incident_ids"]) for r in rows] == [(OTHER, ["c"]), (TABLE, ["a"])]
    assert all(set(r) == {"urn", *HEALTH_COLUMNS} for r in rows)


def test_severities_rank_sev_numbers_first_then_other_values_then_none() -> None:
    assert worst_severity(["SEV-4", None, "SEV-2", "sev-3"]) == "SEV-2"
    assert worst_severity([None, "custom", "SEV-4"]) == "SEV-4"
    assert worst_severity([None, "high"]) == "high"
    assert worst_severity([None, None]) is None
    assert worst_severity([]) is None
    assert sorted(["SEV-10", "SEV-2"], key=severity_rank) == ["SEV-2", "SEV-10"]


def test_the_mongodb_update_never_inserts_and_is_guarded_by_the_health_version() -> None:
    [row] = asset_health([_incident("a", "opened", 10, "SEV-2")], NOW)
    op = mongo_health_update(row)
    assert op["upsert"] is False
    assert op["q"] == {
        "_id": TABLE,
        "$or": [
            {"health_version": None},
            {"health_version": {"$lt": 10}},
            {"health_version": 10, "health_event_id": {"$lte": "e-a-10"}},
        ],
    }
    assert op["u"]["$set"]["health"] == DEGRADED and op["u"]["$set"]["open_incident_ids"] == ["a"]


def test_a_new_asset_document_starts_healthy_but_an_update_leaves_the_health_alone() -> None:
    state = {
        "urn": TABLE,
        **dict.fromkeys(ASSETS.fields),
        "deleted": False,
        "version": 1,
        "event_id": "e",
        "event_time": NOW,
        "updated_at": NOW,
    }
    op = spec_upsert(ASSETS)(state)
    assert op["u"]["$setOnInsert"] == {"health": HEALTHY, "open_incidents": 0}
    assert not set(HEALTH_COLUMNS) & set(op["u"]["$set"])
    tag = {"tag": "PII", **dict.fromkeys(CLASSIFICATIONS.fields), **{k: state[k] for k in ("urn", *META)}}
    assert "$setOnInsert" not in spec_upsert(CLASSIFICATIONS)(tag)["u"]


def test_health_changes_are_published_with_deterministic_ids() -> None:
    rows = asset_health([_incident("a", "opened", 10, "SEV-2")], NOW)
    [event] = change_events("acme", HEALTH, change_rows(rows))
    assert event.data == {
        "table": "asset_health",
        "key": {"urn": TABLE},
        "deleted": False,
        "version": 10,
        "event_id": "e-a-10",
        "state": {"health": DEGRADED, "health_severity": "SEV-2", "open_incidents": 1, "open_incident_ids": ["a"]},
    }
    [again] = change_events("acme", HEALTH, change_rows(asset_health([_incident("a", "opened", 10, "SEV-2")], NOW)))
    assert again.id == event.id


def test_the_incident_index_selects_incident_urns_and_the_assets_that_have_incidents() -> None:
    index = IncidentIndex()
    assert not index.loaded("acme")
    index.load("acme", [TABLE])
    assert index.loaded("acme")
    # A batch of asset upserts: only the asset with incident rows is recomputed.
    assert index.to_compute("acme", [], [OTHER, TABLE, "urn:metalake:postgres:x/db/s/t/c"]) == [TABLE]
    assert index.to_compute("acme", [], [OTHER]) == []
    # An incident on an asset the catalog does not know yet: recomputed now, and again when the asset arrives.
    assert index.to_compute("acme", [OTHER], []) == [OTHER]
    assert index.to_compute("acme", [], [OTHER]) == [OTHER]
    # Tenants are apart.
    assert index.to_compute("globex", [], [TABLE]) == []
