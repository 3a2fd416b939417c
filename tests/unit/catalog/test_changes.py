"""The contract of metalake.changes: the state change's encoder, its schema, and the one decoder of the topic."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from catalog.changes import (
    ASSET_ERASED,
    PROPAGATION_COMPLETED,
    STATE_CHANGED,
    Change,
    InvalidChange,
    StateChange,
    change_type,
    decode_change,
)
from metalake.events import CloudEvent, InvalidEvent, new_event, spec_for
from metalake.events.validation import InvalidData

TIME = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
COLUMN = "urn:metalake:postgres:prod/shop/public/orders/email"
UPSTREAM = "urn:metalake:postgres:prod/shop/staging/raw_orders"


def _change(**overrides: Any) -> StateChange:
    values: dict[str, Any] = {
        "id": "9b1f5c2e-0d6a-5e4b-8c3d-2a1b0c9d8e7f",
        "source": "/processors/enrichment",
        "tenant": "acme",
        "time": TIME,
        "table": "classifications",
        "key": {"urn": COLUMN, "tag": "PII"},
        "deleted": False,
        "version": 7,
        "event_id": "5f0c6d2e-8a51-4c3b-9d7e-0e1f2a3b4c52",
        "state": {"source": "auto", "propagate": True, "confidence": 0.97, "rule": "email-regex", "actor": None},
    }
    return StateChange(**{**values, **overrides})


def _record(event: CloudEvent) -> tuple[bytes, bytes, list[tuple[str, bytes]]]:
    return event.key, event.value(), event.headers()


def test_the_record_is_what_the_job_published_before_the_contract() -> None:
    # The streaming job built this CloudEvent by hand; consumers of the topic read exactly these bytes, but for the
    # key: the tenant alone since issue 13 (all of a tenant on one partition, see changes_key).
    change = _change()
    by_hand = CloudEvent(
        id=change.id,
        source="/processors/enrichment",
        type=STATE_CHANGED,
        time=TIME,
        subject=COLUMN,
        tenantid="acme",
        partitionkey="acme",
        data={
            "table": "classifications",
            "key": {"urn": COLUMN, "tag": "PII"},
            "deleted": False,
            "version": 7,
            "event_id": change.event_id,
            "state": dict(change.state),
        },
    )
    assert _record(change.event()) == _record(by_hand)


def test_the_value_keeps_the_key_and_field_order() -> None:
    edge = _change(table="lineage_edges", key={"upstream": UPSTREAM, "urn": COLUMN}, state={"b": 1, "a": None})
    value = edge.event().value()
    assert value.startswith(b'{"table":"lineage_edges","key":{"upstream":')
    assert json.loads(value)["state"] == {"b": 1, "a": None}
    assert list(json.loads(value)["state"]) == ["b", "a"]


def test_the_encoder_output_matches_the_schema() -> None:
    validator = Draft202012Validator(spec_for(STATE_CHANGED).schema)
    for change in (
        _change(),
        _change(deleted=True, state={}),
        _change(table="asset_health", key={"urn": COLUMN}, event_id="", state={"health": "healthy"}),
        _change(table="incidents", key={"incident_id": "f83867b6", "urn": COLUMN}),
        _change(table="propagated_tags", key={"urn": COLUMN, "tag": "PII", "origin": UPSTREAM}),
    ):
        assert not list(validator.iter_errors(json.loads(change.event().value())))


def test_dates_in_the_state_are_written_as_iso_text() -> None:
    change = _change(state={"seen": datetime(2024, 5, 1, 12, tzinfo=UTC), "on": date(2024, 5, 1), "xs": (1, 2)})
    state = json.loads(change.event().value())["state"]
    assert state == {"seen": "2024-05-01T12:00:00+00:00", "on": "2024-05-01", "xs": [1, 2]}


@pytest.mark.parametrize(
    "overrides",
    [
        {"table": "nope"},
        {"key": {"tag": "PII"}},
        {"key": {"urn": "not-a-urn"}},
        {"key": {"urn": COLUMN, "colour": "red"}},
        {"version": -1},
    ],
)
def test_the_encoder_refuses_what_breaks_the_schema(overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError):  # the model's own checks (ValidationError) or the schema's (InvalidData)
        _change(**overrides).event()


def test_the_schema_words_what_the_encoder_refuses() -> None:
    with pytest.raises(InvalidData, match="data/key/urn"):
        _change(key={"urn": "not-a-urn"}).event()


def test_round_trip() -> None:
    change = _change(traceparent="00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
    decoded = decode_change(*_record(change.event()))
    assert decoded.state_change == change
    assert (decoded.id, decoded.type, decoded.tenant, decoded.subject) == (change.id, STATE_CHANGED, "acme", COLUMN)
    assert decoded.time == "2024-05-01T12:00:00.123000Z"
    assert decoded.data == json.loads(change.event().value())


def test_the_row_is_flat() -> None:
    assert _change(state={"source": "human"}, deleted=True).row == {
        "source": "human",
        "urn": COLUMN,
        "tag": "PII",
        "deleted": True,
        "version": 7,
        "event_id": "5f0c6d2e-8a51-4c3b-9d7e-0e1f2a3b4c52",
    }


def _headers(event: CloudEvent, **replaced: bytes | None) -> list[tuple[str, bytes]]:
    out = [(n, replaced.get(n, v)) for n, v in event.headers()]
    return [(n, v) for n, v in out if v is not None]


GOOD = b"(the encoder's value)"


@pytest.mark.parametrize(
    ("value", "replaced", "field"),
    [
        (b"not json", {}, "data"),
        (b"[1]", {}, "data"),
        (b"NaN", {}, "data"),
        (None, {}, "data"),
        (b'{"table":"assets"}', {}, "data/(root)"),
        (GOOD, {"ce_tenantid": None}, "ce_tenantid"),
        (GOOD, {"ce_tenantid": b"Not_A_Tenant"}, "ce_tenantid"),
        (GOOD, {"ce_type": b"io.metalake.nope.v1"}, "ce_type"),
        (GOOD, {"ce_subject": b"urn:metalake:postgres:prod/shop/public/other"}, "ce_subject"),
        (GOOD, {"content-type": b"text/plain"}, "content-type"),
    ],
)
def test_bad_records_are_refused(value: bytes | None, replaced: dict[str, bytes | None], field: str) -> None:
    event = _change().event()
    with pytest.raises(InvalidChange) as caught:
        decode_change(event.key, event.value() if value == GOOD else value, _headers(event, **replaced))
    assert caught.value.field == field
    assert COLUMN not in caught.value.reason


def test_a_bad_value_is_refused_without_quoting_it() -> None:
    event = _change().event()
    data = json.loads(event.value())
    data["key"]["tag"] = "secret value with spaces"
    with pytest.raises(InvalidChange) as caught:
        decode_change(event.key, json.dumps(data).encode(), event.headers())
    assert caught.value.field == "data/key/tag"
    assert "secret" not in caught.value.reason
    assert caught.value.tenant_id == "acme"


def test_an_invalid_change_is_an_invalid_event() -> None:
    # Code that already handles InvalidEvent (reason, field, tenant_id) handles a bad change the same way.
    with pytest.raises(InvalidEvent, match="missing header ce_specversion"):
        decode_change(b"k", b"{}", [("ce_type", STATE_CHANGED.encode())])


@pytest.mark.parametrize("name", [PROPAGATION_COMPLETED, ASSET_ERASED])
def test_the_other_records_of_the_topic_decode_without_a_state_change(
    name: str, examples: dict[str, dict[str, Any]]
) -> None:
    event = new_event(name, "acme", examples[name], source="/processors/x", event_id="e1", time=TIME)
    change = decode_change(*_record(event))
    assert change.state_change is None
    assert (change.type, change.data) == (name, examples[name])
    assert change_type(event.headers()) == name


def test_change_type_reads_only_the_header() -> None:
    assert change_type([("ce_type", STATE_CHANGED.encode()), ("other", b"\xff")]) == STATE_CHANGED
    assert change_type([("ce_type", STATE_CHANGED)]) == STATE_CHANGED
    assert change_type([("ce_type", None)]) is None
    assert change_type(None) is None


def test_a_change_of_an_event_carries_its_time_as_sent() -> None:
    event = _change().event()
    assert Change.of(event).time == "2024-05-01T12:00:00.123000Z"
    assert Change.of(event, "2024-05-01T12:00:00.123Z").time == "2024-05-01T12:00:00.123Z"
    assert Change.of(event).happened_at == TIME
