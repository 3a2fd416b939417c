"""The batch fold of current-state tables: newest version wins, carried fields, tombstones."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from processors.enrichment.parse import ParsedRow
from processors.enrichment.projection import spec_upsert
from processors.enrichment.state import ASSETS, CLASSIFICATIONS, INCIDENTS, LINEAGE, fold
from tests._support.parsedrows import valid_row

NOW = datetime(2026, 11, 22, tzinfo=UTC)
T = datetime(2026, 11, 21, tzinfo=UTC)
URN = "urn:metalake:postgres:prod/shop/public/orders"


def _row(event_type: str, version: int, event_id: str, data: dict[str, Any], valid: bool = True) -> ParsedRow:
    return valid_row(event_type, version, event_id, data, T)._replace(valid=valid)


def _upsert(version: int, event_id: str, **data: Any) -> ParsedRow:
    return _row("io.metalake.asset.upserted.v1", version, event_id, {"urn": URN, "version": version, **data})


def test_assets_newest_wins_and_carried_fields_fold_forward() -> None:
    rows = [
        _upsert(2, "b", kind="table", name="orders"),
        _upsert(1, "a", kind="table", name="orders_old", description="from v1", owners=["x@y"]),
    ]
    [state] = fold(ASSETS, rows, NOW)
    assert state == {
        "urn": URN,
        "kind": "table",
        "name": "orders",
        "platform": "postgres",
        "qualified_name": "shop.public.orders",
        "description": "from v1",
        "data_type": None,
        "owners": ["x@y"],
        "properties": None,
        "deleted": False,
        "version": 2,
        "event_id": "b",
        "event_time": T,
        "updated_at": NOW,
    }


def test_a_tie_in_version_is_broken_by_event_id() -> None:
    rows = [_upsert(5, "z", kind="table", name="by-z"), _upsert(5, "a", kind="table", name="by-a")]
    [state] = fold(ASSETS, rows, NOW)
    assert (state["name"], state["event_id"]) == ("by-z", "z")


def test_a_delete_is_a_tombstone_that_keeps_the_last_values() -> None:
    rows = [
        _upsert(1, "a", kind="table", name="orders"),
        _row("io.metalake.asset.deleted.v1", 2, "b", {"urn": URN, "version": 2}),
    ]
    [state] = fold(ASSETS, rows, NOW)
    assert (state["deleted"], state["version"], state["name"]) == (True, 2, "orders")
    op = spec_upsert(ASSETS)(state)
    assert op["q"]["_id"] == URN
    assert op["u"]["$set"]["deleted"] is True and op["u"]["$set"]["name"] == "orders"


def test_an_older_delete_does_not_win_over_a_newer_upsert() -> None:
    rows = [
        _row("io.metalake.asset.deleted.v1", 1, "a", {"urn": URN, "version": 1}),
        _upsert(2, "b", kind="table", name="orders"),
    ]
    [state] = fold(ASSETS, rows, NOW)
    assert state["deleted"] is False


def test_invalid_rows_and_other_types_are_ignored() -> None:
    rows = [
        _upsert(1, "a", kind="table", name="x")._replace(valid=False),
        _row(
            "io.metalake.classification.added.v1", 1, "c", {"urn": URN, "version": 1, "tag": "PII", "source": "human"}
        ),
    ]
    assert fold(ASSETS, rows, NOW) == []


def test_classifications_are_keyed_by_urn_and_tag() -> None:
    add = "io.metalake.classification.added.v1"
    rows = [
        _row(add, 1, "a", {"urn": URN, "version": 1, "tag": "PII", "source": "auto", "confidence": 0.9}),
        _row(add, 1, "b", {"urn": URN, "version": 1, "tag": "GDPR", "source": "human"}),
        _row("io.metalake.classification.removed.v1", 2, "c", {"urn": URN, "version": 2, "tag": "PII"}),
    ]
    states = {s["tag"]: s for s in fold(CLASSIFICATIONS, rows, NOW)}
    assert (states["PII"]["deleted"], states["PII"]["source"], states["PII"]["confidence"]) == (True, "auto", 0.9)
    assert (states["GDPR"]["deleted"], states["GDPR"]["source"]) == (False, "human")
    assert spec_upsert(CLASSIFICATIONS)(states["PII"])["q"]["_id"] == f"{URN}|PII"
    # A removal sets no values in MongoDB: the document keeps what it had.
    assert "source" not in spec_upsert(CLASSIFICATIONS)(states["PII"])["u"]["$set"]


def test_lineage_edges_are_keyed_by_upstream_and_downstream() -> None:
    up = "urn:metalake:postgres:prod/shop/public/customers"
    rows = [
        _row(
            "io.metalake.lineage.edge.added.v1",
            1,
            "a",
            {"urn": URN, "upstream": up, "version": 1, "blocked_tags": ["PII"]},
        )
    ]
    [edge] = fold(LINEAGE, rows, NOW)
    assert (edge["upstream"], edge["urn"], edge["blocked_tags"], edge["transformation"]) == (up, URN, ["PII"], None)


def test_an_incident_update_can_clear_a_field() -> None:
    base = {"urn": URN, "incident_id": "i-1", "status": "opened", "severity": "SEV-2"}
    rows = [
        _row("com.montecarlodata.incident.opened.v1", 1, "a", {**base, "version": 1}),
        _row(
            "com.montecarlodata.incident.updated.v1",
            2,
            "b",
            {**base, "version": 2, "status": "updated", "severity": None},
        ),
    ]
    [incident] = fold(INCIDENTS, rows, NOW)
    assert (incident["status"], incident["severity"]) == ("updated", None)
    assert spec_upsert(INCIDENTS)(incident)["u"]["$set"]["severity"] is None
