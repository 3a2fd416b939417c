"""The rule of control.auth.pii: which events may unmask a PII-tagged column, and who may send them."""

from __future__ import annotations

from typing import Any

import pytest

from control.auth.pii import (
    ASSET_DELETED,
    CLASSIFICATION_ADDED,
    CLASSIFICATION_REMOVED,
    CLASSIFICATION_UNPROPAGATED,
    EDGE_ADDED,
    EDGE_REMOVED,
    blocks_masked,
    cut_urns,
    may_weaken,
    weakening,
    withdraws,
)
from control.auth.principal import Principal, Scope
from tenants.access.settings import AccessSettings

PATTERNS = AccessSettings().pii_tags  # the defaults: PII, PII.*, GDPR, GDPR.*
URN = "urn:metalake:trino:metalake/lake/acme/customers/email"
UPSTREAM = "urn:metalake:trino:metalake/lake/acme/raw/email"


def _field(event_type: str, data: dict[str, Any], patterns: list[str] = PATTERNS) -> str | None:
    found = weakening(event_type, data, patterns)
    return None if found is None else found.field


@pytest.mark.parametrize("tag", ["PII", "PII.email", "GDPR", "GDPR.personal"])
def test_removing_or_withdrawing_a_masked_tag_weakens(tag: str) -> None:
    assert _field(CLASSIFICATION_REMOVED, {"urn": URN, "version": 1, "tag": tag}) == "data/tag"
    withdrawn = {"urn": URN, "version": 1, "tag": tag, "origin": UPSTREAM}
    assert _field(CLASSIFICATION_UNPROPAGATED, withdrawn) == "data/tag"


@pytest.mark.parametrize("tag", ["finance", "PIIX", "pii", "Gdpr.personal"])
def test_other_tags_come_off_freely(tag: str) -> None:
    # fnmatch patterns, case-sensitive: what the access processor masks, nothing else.
    assert _field(CLASSIFICATION_REMOVED, {"urn": URN, "version": 1, "tag": tag}) is None


def test_the_tenant_settings_decide_what_is_masked() -> None:
    data = {"urn": URN, "version": 1, "tag": "HR.salary"}
    assert _field(CLASSIFICATION_REMOVED, data) is None
    assert _field(CLASSIFICATION_REMOVED, data, ["HR.*"]) == "data/tag"


@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("propagate", False),
        ("restrict_propagation_through_lineage", True),
        ("remove_propagations_on_entity_delete", True),
    ],
)
def test_adding_a_masked_tag_that_stops_spreading_weakens(option: str, value: bool) -> None:
    data = {"urn": URN, "version": 1, "tag": "PII", "source": "human", option: value}
    assert _field(CLASSIFICATION_ADDED, data) == f"data/{option}"
    assert _field(CLASSIFICATION_ADDED, {**data, "tag": "finance"}) is None


def test_adding_a_masked_tag_that_spreads_is_free() -> None:
    data = {
        "urn": URN,
        "version": 1,
        "tag": "PII",
        "source": "auto",
        "propagate": True,
        "restrict_propagation_through_lineage": False,
        "remove_propagations_on_entity_delete": False,
    }
    assert _field(CLASSIFICATION_ADDED, data) is None
    assert _field(CLASSIFICATION_ADDED, {"urn": URN, "version": 1, "tag": "PII", "source": "auto"}) is None


def test_edges_that_stop_pii_weaken() -> None:
    edge = {"urn": URN, "upstream": UPSTREAM, "version": 1}
    assert _field(EDGE_ADDED, edge) is None
    assert _field(EDGE_ADDED, {**edge, "propagation": "both"}) is None
    assert _field(EDGE_ADDED, {**edge, "blocked_tags": ["finance"]}) is None
    assert _field(EDGE_ADDED, {**edge, "blocked_tags": ["finance", "GDPR"]}) == "data/blocked_tags"
    assert _field(EDGE_ADDED, {**edge, "propagation": "none"}) == "data/propagation"
    assert _field(EDGE_ADDED, {**edge, "propagation": "upstream"}) == "data/propagation"


@pytest.mark.parametrize(
    ("blocked", "patterns", "expected"),
    [
        ("PII", ["PII"], True),
        ("PII.email", ["PII.*"], True),
        # Blocking a tag blocks its sub-tags: "HR" stops "HR.salary".
        ("HR", ["HR.salary"], True),
        ("HR", ["HR.s*"], True),
        ("HR", ["*"], True),
        ("HR", ["HRX.*"], False),
        ("HR.salary", ["HR"], False),
        ("finance", ["PII", "PII.*", "GDPR", "GDPR.*"], False),
    ],
)
def test_blocks_masked(blocked: str, patterns: list[str], expected: bool) -> None:
    assert blocks_masked(blocked, patterns) is expected


def test_events_that_do_not_unmask() -> None:
    for event_type in ("io.metalake.asset.deleted.v1", "io.metalake.lineage.edge.removed.v1"):
        assert _field(event_type, {"urn": URN, "upstream": UPSTREAM, "version": 1}) is None
    propagated = {"urn": URN, "version": 1, "tag": "PII", "origin": UPSTREAM, "path": [UPSTREAM, URN], "depth": 1}
    assert _field("io.metalake.classification.propagated.v1", propagated) is None


@pytest.mark.parametrize(
    ("scopes", "tenant", "expected"),
    [
        ({Scope.EVENTS_WRITE}, "acme", False),
        ({Scope.EVENTS_WRITE, Scope.TENANT_READ, Scope.SQL_READ}, "acme", False),
        ({Scope.EVENTS_WRITE, Scope.PII_READ}, "acme", True),
        ({Scope.TENANT_ADMIN}, "acme", True),
        ({Scope.PLATFORM_ADMIN}, None, True),
    ],
)
def test_who_may_weaken(scopes: set[str], tenant: str | None, expected: bool) -> None:
    assert may_weaken(Principal("client", tenant, frozenset(scopes))) is expected


DOWN = "urn:metalake:trino:metalake/lake/acme/mart/email"
ROWS = [
    {"tag": "finance", "path": ["urn:o", UPSTREAM, URN]},
    {"tag": "PII", "path": [UPSTREAM, URN, DOWN]},
]


@pytest.mark.parametrize(
    ("event_type", "data", "field"),
    [
        # An edge the PII tag travelled, either way round (an upstream-propagating edge is walked backwards).
        (EDGE_REMOVED, {"upstream": UPSTREAM, "urn": URN}, "data/upstream"),
        (EDGE_REMOVED, {"upstream": DOWN, "urn": URN}, "data/upstream"),
        # Not on the path, or only the non-PII tag's path.
        (EDGE_REMOVED, {"upstream": UPSTREAM, "urn": DOWN}, None),
        (EDGE_REMOVED, {"upstream": "urn:o", "urn": UPSTREAM}, None),
        # Deleting an asset the tag went through or reached withdraws it; deleting its origin freezes it.
        (ASSET_DELETED, {"urn": URN}, "data/urn"),
        (ASSET_DELETED, {"urn": DOWN}, "data/urn"),
        (ASSET_DELETED, {"urn": UPSTREAM}, None),
        (ASSET_DELETED, {"urn": "urn:elsewhere"}, None),
    ],
)
def test_cutting_the_lineage_a_pii_tag_propagated_along_weakens(
    event_type: str, data: dict[str, Any], field: str | None
) -> None:
    found = withdraws(event_type, data, ROWS, PATTERNS)
    assert (found.field if found is not None else None) == field
    assert withdraws(event_type, data, [], PATTERNS) is None
    # What the reader asks the projection for.
    assert set(cut_urns(event_type, data)) == set(data.values())
