"""Decoding changes, their kinds, and subscription filters on kinds, tags and asset patterns."""

from __future__ import annotations

import json

import pytest

from catalog.changes import (
    PROPAGATION_COMPLETED,
    STATE_CHANGED,
    Change,
    InvalidChange,
    StateChange,
    decode_change,
)
from control.subscriptions.filters import Filters

URN = "urn:metalake:postgres:prod/shop/public/customers/email"


def _change(table: str = "classifications", deleted: bool = False, tag: str = "PII") -> Change:
    return Change(
        "c1", STATE_CHANGED, "acme", {"table": table, "key": {"urn": URN, "tag": tag}, "deleted": deleted}, URN
    )


def test_kinds() -> None:
    assert _change().kind == "classification.added"
    assert _change(deleted=True).kind == "classification.removed"
    assert _change("propagated_tags").kind == "tag.propagated"
    assert _change("assets", deleted=True).kind == "assets.deleted"
    assert _change("lineage_edges").kind == "lineage_edges.changed"
    done = Change("c2", PROPAGATION_COMPLETED, "acme", {"origin": URN, "tag": "PII", "added": []})
    assert (done.kind, done.asset, done.tag) == ("propagation.completed", URN, "PII")


@pytest.mark.parametrize(
    ("filters", "expected"),
    [
        (Filters(), True),
        (Filters(event_types=("classification.*",)), True),
        (Filters(event_types=(STATE_CHANGED,)), True),
        (Filters(event_types=("propagation.completed",)), False),
        (Filters(tags=("pii", "GDPR")), True),
        (Filters(tags=("GDPR",)), False),
        (Filters(assets=("urn:metalake:postgres:prod/shop/*",)), True),
        (Filters(assets=("urn:metalake:postgres:prod/mart/*",)), False),
        (Filters(event_types=("classification.added",), tags=("PII",), assets=("*email",)), True),
        (Filters(event_types=("classification.added",), tags=("PII",), assets=("*phone",)), False),
    ],
)
def test_filters(filters: Filters, expected: bool) -> None:
    assert filters.matches(_change()) is expected


def test_tag_filter_does_not_match_changes_without_a_tag() -> None:
    asset = Change("c3", STATE_CHANGED, "acme", {"table": "assets", "key": {"urn": URN}, "deleted": False})
    assert not Filters(tags=("PII",)).matches(asset)
    assert Filters(assets=(URN,)).matches(asset)


def test_filters_refuse_unknown_fields() -> None:
    with pytest.raises(ValueError, match="extra"):
        Filters.model_validate({"tagz": ["PII"]})


def test_decode() -> None:
    state = StateChange(
        id="c1",
        source="/processors/enrichment",
        tenant="acme",
        table="classifications",
        key={"urn": URN, "tag": "PII"},
        deleted=False,
        version=3,
        event_id="e3",
        state={"source": "human"},
    )
    event = state.event()
    headers = [*event.headers(), ("other", b"\xff")]  # other tools' headers may be binary
    change = decode_change(event.key, event.value(), headers)
    assert (change.id, change.tenant, change.kind, change.tag, change.asset) == ("c1", "acme", *_KIND_TAG_ASSET)
    assert change.state_change == state
    assert change.time == dict(headers)["ce_time"].decode()
    without_tenant = [(n, v) for n, v in headers if n != "ce_tenantid"]
    with pytest.raises(InvalidChange, match="ce_tenantid"):
        decode_change(event.key, event.value(), without_tenant)
    with pytest.raises(InvalidChange, match="not JSON"):
        decode_change(event.key, b"{nope", headers)
    with pytest.raises(InvalidChange, match="object"):
        decode_change(event.key, b"[1]", headers)
    with pytest.raises(InvalidChange, match="data/"):
        decode_change(event.key, json.dumps({"table": "classifications"}).encode(), headers)


_KIND_TAG_ASSET = ("classification.added", "PII", URN)
