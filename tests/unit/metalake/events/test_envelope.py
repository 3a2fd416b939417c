"""CloudEvents in Kafka binary mode: building, encoding, decoding, and every way a record is rejected."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from pydantic import ValidationError

from metalake.events.envelope import CloudEvent, InvalidEvent, decode_record, new_event
from metalake.events.registry import UnknownEventType, event_types
from metalake.events.validation import InvalidData

UPSERT = "io.metalake.asset.upserted.v1"
URN = "urn:metalake:postgres:prod/shop/public/orders"
SECRET = "SECRET-VALUE-123"
TIME = datetime(2024, 5, 1, 12, 0, 0, 123000, tzinfo=UTC)
EVENT_ID = "0b9c3d3e-6f44-4bd6-8e1c-6a4f3f1d2c10"
TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"


def _upsert(**changes: Any) -> dict[str, Any]:
    return {"urn": URN, "version": 5, "kind": "table", "name": "orders", **changes}


def _event(**kwargs: Any) -> CloudEvent:
    source = "/tenants/acme/connectors/pg"
    return new_event(UPSERT, "acme", _upsert(), source=source, event_id=EVENT_ID, time=TIME, **kwargs)


def _record(**header_changes: bytes | None) -> tuple[bytes, bytes, list[tuple[str, bytes | None]]]:
    """A valid record with some headers replaced (bytes) or removed (None)."""
    event = _event()
    headers: list[tuple[str, bytes | None]] = []
    for name, value in event.headers():
        if name in header_changes:
            if header_changes[name] is not None:
                headers.append((name, header_changes[name]))
        else:
            headers.append((name, value))
    return event.key, event.value(), headers


def _decode_error(key: bytes | None, value: bytes | None, headers: Any) -> InvalidEvent:
    with pytest.raises(InvalidEvent) as info:
        decode_record(key, value, headers)
    return info.value


# --- building ---------------------------------------------------------------------------------------------------


def test_new_event_fills_the_envelope() -> None:
    event = _event()
    assert event.id == EVENT_ID
    assert event.type == UPSERT
    assert event.specversion == "1.0"
    assert event.source == "/tenants/acme/connectors/pg"
    assert event.time == TIME
    assert event.subject == URN
    assert event.tenantid == "acme"
    assert event.partitionkey == f"acme:{URN}"
    assert event.traceparent is None
    assert event.datacontenttype == "application/json"
    assert event.data == _upsert()
    assert event.version == 5


def test_new_event_generates_id_and_time() -> None:
    before = datetime.now(UTC)
    event = new_event(UPSERT, "acme", _upsert(), source="s")
    assert uuid.UUID(event.id).version == 4
    assert event.time.tzinfo is not None
    assert before <= event.time <= datetime.now(UTC)


def test_new_event_copies_data() -> None:
    data = _upsert()
    event = new_event(UPSERT, "acme", data, source="s")
    data["name"] = "changed"
    assert event.data["name"] == "orders"


def test_key_is_the_partition_key() -> None:
    assert _event().key == f"acme:{URN}".encode()


def test_headers_in_binary_mode() -> None:
    assert _event(traceparent=TRACEPARENT).headers() == [
        ("content-type", b"application/json"),
        ("ce_specversion", b"1.0"),
        ("ce_id", EVENT_ID.encode()),
        ("ce_source", b"/tenants/acme/connectors/pg"),
        ("ce_type", UPSERT.encode()),
        ("ce_time", b"2024-05-01T12:00:00.123000Z"),
        ("ce_subject", URN.encode()),
        ("ce_tenantid", b"acme"),
        ("ce_partitionkey", f"acme:{URN}".encode()),
        ("ce_traceparent", TRACEPARENT.encode()),
    ]


def test_absent_optional_attributes_have_no_header() -> None:
    names = [name for name, _ in _event().headers()]
    assert "ce_traceparent" not in names


def test_non_utc_time_keeps_its_offset() -> None:
    time = datetime(2024, 5, 1, 14, 0, tzinfo=timezone(timedelta(hours=2)))
    event = new_event(UPSERT, "acme", _upsert(), source="s", time=time)
    assert dict(event.headers())["ce_time"] == b"2024-05-01T14:00:00+02:00"


def test_value_is_compact_utf8_json() -> None:
    event = new_event(UPSERT, "acme", _upsert(name="Bestellungen ä"), source="s")
    assert event.value() == ('{"urn":"' + URN + '","version":5,"kind":"table","name":"Bestellungen ä"}').encode("utf-8")


def test_new_event_rejects_unknown_type() -> None:
    with pytest.raises(UnknownEventType):
        new_event("io.metalake.nope.v1", "acme", _upsert(), source="s")


def test_new_event_rejects_invalid_data() -> None:
    with pytest.raises(InvalidData) as info:
        new_event(UPSERT, "acme", _upsert(version="5"), source="s")
    assert info.value.field == "version"


def test_new_event_rejects_invalid_tenant() -> None:
    with pytest.raises(ValidationError, match="invalid tenant id"):
        new_event(UPSERT, "Acme_Corp", _upsert(), source="s")


def test_version_property() -> None:
    event = CloudEvent(id="1", source="s", type=UPSERT, time=TIME, tenantid="acme", partitionkey="k", data={})
    assert event.version is None


# --- round trips --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", [spec.name for spec in event_types()])
def test_round_trip_every_type(name: str, examples: dict[str, dict[str, Any]]) -> None:
    source = "/tenants/acme-corp/connectors/pg"
    event = new_event(name, "acme-corp", examples[name], source=source, traceparent=TRACEPARENT)
    decoded = decode_record(event.key, event.value(), event.headers())
    assert decoded == event
    assert decoded.time == event.time


def test_round_trip_with_offset_time() -> None:
    time = datetime(2024, 5, 1, 14, 0, 0, 1, tzinfo=timezone(timedelta(hours=-5)))
    event = new_event(UPSERT, "acme", _upsert(), source="s", time=time)
    decoded = decode_record(event.key, event.value(), event.headers())
    assert decoded == event
    assert decoded.time.utcoffset() == timedelta(hours=-5)


def test_decode_accepts_charset_parameter() -> None:
    key, value, headers = _record(**{"content-type": b"application/json; charset=utf-8"})
    assert decode_record(key, value, headers).datacontenttype == "application/json; charset=utf-8"


def test_decode_without_content_type_assumes_json() -> None:
    key, value, headers = _record(**{"content-type": None})
    assert decode_record(key, value, headers).data == _upsert()


def test_decode_without_partitionkey_header_uses_the_record_key() -> None:
    key, value, headers = _record(ce_partitionkey=None)
    assert decode_record(key, value, headers).partitionkey == f"acme:{URN}"


def test_decode_without_time_stamps_now() -> None:
    key, value, headers = _record(ce_time=None)
    before = datetime.now(UTC)
    event = decode_record(key, value, headers)
    assert before <= event.time <= datetime.now(UTC)


def test_decode_without_subject_takes_the_urn() -> None:
    # Stores key assets by subject: a record without ce_subject must not yield an asset without a URN.
    key, value, headers = _record(ce_subject=None)
    event = decode_record(key, value, headers)
    assert event.subject == URN
    assert event == _event()


def test_decode_skips_null_headers_and_ignores_foreign_ones() -> None:
    key, value, headers = _record()
    event = decode_record(key, value, [*headers, ("ce_traceparent", None), ("x-other", b"\xff")])
    assert event.traceparent is None
    assert event == _event()


# --- rejections ---------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("attr", ["specversion", "id", "source", "type", "tenantid"])
def test_missing_required_header(attr: str) -> None:
    key, value, headers = _record(**{f"ce_{attr}": None})
    error = _decode_error(key, value, headers)
    assert error.field == f"ce_{attr}"
    assert str(error) == f"missing header ce_{attr}"


def test_no_headers_at_all() -> None:
    assert _decode_error(b"k", b"{}", None).field == "ce_specversion"


def test_unknown_type() -> None:
    key, value, headers = _record(ce_type=b"io.metalake.nope.v1")
    error = _decode_error(key, value, headers)
    assert error.field == "ce_type"
    assert "io.metalake.nope.v1" in error.reason
    assert error.tenant_id == "acme"


def test_invalid_json() -> None:
    key, _, headers = _record()
    error = _decode_error(key, b'{"urn": "' + SECRET.encode() + b'", ', headers)
    assert error.field == "data"
    assert error.reason.startswith("data is not JSON: JSONDecodeError at position ")
    assert SECRET not in str(error)


def test_value_not_utf8() -> None:
    key, _, headers = _record()
    error = _decode_error(key, b"\xff\xfe\x00", headers)
    assert error.field == "data"


@pytest.mark.parametrize("constant", [b"NaN", b"Infinity", b"-Infinity"])
def test_non_standard_json_constants_are_rejected(constant: bytes) -> None:
    key, _, headers = _record(ce_type=b"io.metalake.classification.added.v1")
    value = b'{"urn":"' + URN.encode() + b'","version":1,"tag":"PII","source":"auto","confidence":' + constant + b"}"
    error = _decode_error(key, value, headers)
    assert error.field == "data"


@pytest.mark.parametrize("value", [b"[1, 2]", b'"text"', b"42", b"null"])
def test_non_object_json(value: bytes) -> None:
    key, _, headers = _record()
    error = _decode_error(key, value, headers)
    assert error.field == "data"
    assert str(error) == "data must be a JSON object"


def test_empty_value() -> None:
    key, _, headers = _record()
    assert _decode_error(key, None, headers).field == "data"


def test_schema_violation_names_the_field() -> None:
    key, _, headers = _record()
    error = _decode_error(key, json.dumps(_upsert(version=SECRET)).encode(), headers)
    assert error.field == "data/version"
    assert str(error) == "data/version: must satisfy type='integer'"
    assert error.tenant_id == "acme"


@pytest.mark.parametrize(
    "data",
    [
        _upsert(version=SECRET),
        _upsert(kind=SECRET),
        _upsert(urn=SECRET),
        _upsert(owners=SECRET),
        _upsert(owners=[SECRET * 40]),
        _upsert(name={"nested": SECRET}),
        _upsert(properties={"k": [SECRET]}),
        _upsert(description=[SECRET]),
        {"urn": URN, "version": 5, "kind": "table"},
    ],
)
def test_reasons_never_quote_payload_values(data: dict[str, Any]) -> None:
    key, _, headers = _record()
    error = _decode_error(key, json.dumps(data).encode(), headers)
    assert error.field.startswith("data")
    assert SECRET not in str(error)
    assert SECRET not in error.reason
    assert SECRET not in error.field


@pytest.mark.parametrize("tenant", [b"Acme_Corp", b"ab", b"1acme"])
def test_bad_tenant_id(tenant: bytes) -> None:
    key, value, headers = _record(ce_tenantid=tenant)
    error = _decode_error(key, value, headers)
    assert error.field == "ce_tenantid"
    assert error.tenant_id is None


def test_bad_tenant_id_is_not_carried_even_when_data_is_also_invalid() -> None:
    key, _, headers = _record(ce_tenantid=b"Bad_Tenant")
    error = _decode_error(key, b"[]", headers)
    assert error.field == "data"
    assert error.tenant_id is None


@pytest.mark.parametrize("content_type", [b"text/plain", b"application/cloudevents+json", b"application/avro"])
def test_wrong_content_type(content_type: bytes) -> None:
    key, value, headers = _record(**{"content-type": content_type})
    error = _decode_error(key, value, headers)
    assert error.field == "content-type"
    assert error.tenant_id == "acme"


def test_subject_must_equal_the_urn() -> None:
    key, value, headers = _record(ce_subject=b"urn:metalake:postgres:prod/shop/public/other")
    error = _decode_error(key, value, headers)
    assert error.field == "ce_subject"
    assert str(error) == "ce_subject must equal data.urn"


def test_wrong_specversion() -> None:
    key, value, headers = _record(ce_specversion=b"0.3")
    assert _decode_error(key, value, headers).field == "ce_specversion"


@pytest.mark.parametrize("time", [b"yesterday", b"2024-05-01T12:00:00"])
def test_bad_or_naive_time(time: bytes) -> None:
    key, value, headers = _record(ce_time=time)
    assert _decode_error(key, value, headers).field == "ce_time"


def test_empty_id() -> None:
    key, value, headers = _record(ce_id=b"")
    assert _decode_error(key, value, headers).field == "ce_id"


def test_header_not_utf8() -> None:
    key, value, headers = _record(ce_source=b"\xff\xfe")
    error = _decode_error(key, value, headers)
    assert error.field == "ce_source"
    assert str(error) == "header ce_source is not UTF-8"


def test_invalid_event_is_a_value_error() -> None:
    key, value, headers = _record(ce_type=None)
    with pytest.raises(ValueError, match="missing header ce_type"):
        decode_record(key, value, headers)
