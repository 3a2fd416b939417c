"""The connector beyond the golden files: status rules, redelivery and dedup, config, limits, the plugin registry."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from pydantic import ValidationError

from connectors.montecarlo import MonteCarloConfig, MonteCarloConnector
from connectors.montecarlo.mapping import SUMMARY_MAX
from control.connectors import registry
from control.connectors.plugin import ConnectorContext, InboundRequest, InvalidPayload
from metalake.events import CloudEvent, decode_record

Request = Callable[..., InboundRequest]
Body = Callable[[str], bytes]
SECRET = b"s3cret-value-never-in-events"


def _body(fixture_body: Body, name: str = "open_anomaly", **payload_changes: Any) -> bytes:
    body = json.loads(fixture_body(name))
    body["payload"].update(payload_changes)
    return json.dumps(body).encode()


def _events(connector: MonteCarloConnector, request: InboundRequest) -> list[CloudEvent]:
    return list(connector.to_events(connector.read(request), request))


def _key(connector: MonteCarloConnector, request: InboundRequest) -> str:
    return connector.dedup_key(connector.read(request), request)


# --- status -----------------------------------------------------------------------------------------------------------

FEEDBACK_STATUS = [
    ("investigating", "updated"),
    ("no_status", "updated"),
    ("work_in_progress", "updated"),
    ("fixed", "resolved"),
    ("expected", "resolved"),
    ("no_action_needed", "resolved"),
    ("false_positive", "resolved"),
    ("FIXED", "resolved"),
    ("some_future_feedback", "updated"),
]


@pytest.mark.parametrize(("feedback", "status"), FEEDBACK_STATUS)
def test_every_alert_feedback_value(
    feedback: str, status: str, connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    [event] = _events(connector, request_for(_body(fixture_body, alert_feedback=feedback)))
    assert event.type == f"com.montecarlodata.incident.{status}.v1"
    assert event.data["status"] == status
    assert event.data["feedback"] == feedback  # kept as sent, even when unknown


@pytest.mark.parametrize(
    ("webhook_type", "changes", "status"),
    [
        ("open_anomaly_incident", {}, "opened"),
        ("open_anomaly_incident", {"declared_alert_severity": "SEV-4"}, "updated"),
        ("open_anomaly_incident", {"owner": "ana@example.com"}, "updated"),
        ("open_anomaly_incident", {"alert_feedback": None, "declared_alert_severity": None, "owner": None}, "opened"),
        ("anomaly_incident", {}, "updated"),
        ("resolve_incident", {"alert_feedback": "fixed"}, "resolved"),
    ],
)
def test_status_rules(
    webhook_type: str,
    changes: dict[str, Any],
    status: str,
    connector: MonteCarloConnector,
    request_for: Request,
    fixture_body: Body,
) -> None:
    body = json.loads(_body(fixture_body, **changes))
    body["type"] = webhook_type
    [event] = _events(connector, request_for(json.dumps(body).encode()))
    assert event.data["status"] == status


def test_explicit_null_in_payload_beats_a_top_level_value(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    body = json.loads(_body(fixture_body, declared_alert_severity=None))
    body["declared_alert_severity"] = "SEV-1"
    [event] = _events(connector, request_for(json.dumps(body).encode()))
    assert event.data["severity"] is None


# --- redelivery and dedup ---------------------------------------------------------------------------------------------


def test_redelivery_yields_the_same_ids(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body, received_at: datetime
) -> None:
    body = fixture_body("multiple_tables")
    first = _events(connector, request_for(body, received_at=received_at))
    again = _events(connector, request_for(body, received_at=received_at + timedelta(minutes=5)))
    assert [e.id for e in first] == [e.id for e in again]
    assert len({e.id for e in first}) == len(first) == 2  # one id per table
    assert [e.version for e in again] == [e.version + 300_000 for e in first if e.version is not None]


def test_reformatted_redelivery_has_the_same_dedup_key(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    body = fixture_body("open_anomaly")
    parsed = json.loads(body)
    parsed["payload"]["event_list"] = [dict(reversed(item.items())) for item in parsed["payload"]["event_list"]]
    compact = json.dumps(parsed, separators=(",", ":")).encode()
    assert compact != body
    assert _key(connector, request_for(compact)) == _key(connector, request_for(body))
    assert [e.id for e in _events(connector, request_for(compact))] == [
        e.id for e in _events(connector, request_for(body))
    ]


@pytest.mark.parametrize(
    "changes",
    [
        {"alert_feedback": "investigating"},
        {"declared_alert_severity": "SEV-1"},
        {"owner": "ana@example.com"},
        {"incident_id": "00000000-0000-4000-8000-000000000000"},
        {"event_list": [{"event_details": "Has 43 rows vs. 101 expected", "table_name": "artemis"}]},
    ],
)
def test_a_change_of_content_changes_the_key_and_ids(
    changes: dict[str, Any], connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    base, changed = request_for(fixture_body("open_anomaly")), request_for(_body(fixture_body, **changes))
    assert _key(connector, changed) != _key(connector, base)
    assert _events(connector, changed)[0].id != _events(connector, base)[0].id


def test_a_change_of_account_or_type_changes_the_key(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    base = _key(connector, request_for(fixture_body("open_anomaly")))
    for key, value in (("account", {"id": "another"}), ("type", "open_custom_rule_anomaly_incident")):
        body = json.loads(fixture_body("open_anomaly"))
        body[key] = value
        assert _key(connector, request_for(json.dumps(body).encode())) != base


def test_top_level_and_payload_fields_give_the_same_key(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    inside = _body(fixture_body, alert_feedback="fixed")
    top = json.loads(fixture_body("open_anomaly"))
    top["alert_feedback"] = "fixed"
    assert _key(connector, request_for(json.dumps(top).encode())) == _key(connector, request_for(inside))


def test_verify_read_dedup_key_and_events_parse_and_validate_the_body_once(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body, monkeypatch: pytest.MonkeyPatch
) -> None:
    from connectors.montecarlo import payloads
    from connectors.montecarlo.signature import sign, signed_message
    from control.connectors import plugin as base

    loads, envelopes = [], []
    real_loads, real_envelope = json.loads, payloads.parse_envelope
    monkeypatch.setattr(json, "loads", lambda body: loads.append(body) or real_loads(body))
    monkeypatch.setattr(payloads, "parse_envelope", lambda raw: envelopes.append(raw) or real_envelope(raw))
    body = fixture_body("open_anomaly")
    message = signed_message(base.ParsedBody(real_loads(body)))
    assert message is not None
    request = request_for(body, {"x-mcd-signature": sign(SECRET, message)})
    connector.verify(request, [SECRET])
    delivery = connector.read(request)
    key = connector.dedup_key(delivery, request)
    events = list(connector.to_events(delivery, request))
    assert loads == [body] and len(envelopes) == 1
    assert events[0].id == _events(connector, request_for(body))[0].id  # a new request is read afresh
    assert _key(connector, request_for(body)) == key and len(loads) == 3 and len(envelopes) == 3


def test_read_of_an_unparseable_body(connector: MonteCarloConnector, request_for: Request) -> None:
    with pytest.raises(InvalidPayload) as info:
        connector.read(request_for(b"{"))
    assert info.value.field == "(body)"


# --- events -----------------------------------------------------------------------------------------------------------


def test_events_carry_no_secret_and_decode(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    from connectors.montecarlo.signature import sign, signed_message
    from control.connectors.plugin import parse_json

    body = fixture_body("feedback_fixed")
    message = signed_message(parse_json(body))
    assert message is not None
    signature = sign(SECRET, message)
    request = request_for(body, {"x-mcd-signature": signature})
    connector.verify(request, [SECRET])
    for event in _events(connector, request):
        wire = event.value() + b"".join(value for _, value in event.headers())
        assert SECRET not in wire
        assert signature.encode() not in wire
        assert decode_record(event.key, event.value(), event.headers()) == event
        assert event.source == "/tenants/acme/connectors/montecarlo"
        assert event.partitionkey == f"acme:{event.subject}"


def test_naive_received_at_is_utc(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body, received_at: datetime
) -> None:
    aware = _events(connector, request_for(fixture_body("open_anomaly"), received_at=received_at))[0]
    naive = _events(connector, request_for(fixture_body("open_anomaly"), received_at=received_at.replace(tzinfo=None)))[
        0
    ]
    assert naive.version == aware.version == 1714564800123
    assert naive.time == aware.time


def test_summary_is_truncated(connector: MonteCarloConnector, request_for: Request, fixture_body: Body) -> None:
    long = "x" * 5000
    [event] = _events(
        connector, request_for(_body(fixture_body, event_list=[{"event_details": long, "table_name": "t"}]))
    )
    assert len(event.data["summary"]) == SUMMARY_MAX
    assert event.data["summary"].endswith("…")


def test_a_field_too_long_for_the_schema_is_an_invalid_payload(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    with pytest.raises(InvalidPayload) as info:
        _events(connector, request_for(_body(fixture_body, owner="a" * 400 + "@example.com")))
    assert info.value.field == "data/owner"
    assert "aaaa" not in str(info.value)  # reasons never quote payload values


def test_numbers_are_accepted_where_strings_are_expected(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    [event] = _events(connector, request_for(_body(fixture_body, incident_id=12345)))
    assert event.data["incident_id"] == "12345"


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"owner": {"email": "ana@example.com"}}, "payload/owner"),
        ({"event_list": [None]}, "payload/event_list/0"),
        ({"event_list": [{"table_name": ["artemis"]}]}, "payload/event_list/0/table_name"),
    ],
)
def test_a_value_of_the_wrong_shape_names_its_location(
    changes: dict[str, Any], field: str, connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    with pytest.raises(InvalidPayload) as info:
        _events(connector, request_for(_body(fixture_body, **changes)))
    assert info.value.field == field
    assert "ana@example.com" not in str(info.value)


def test_lone_surrogates_do_not_break_the_kafka_record(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    body = _body(fixture_body).replace(b'"artemis"', b'"art\\ud800emis"')
    [event] = _events(connector, request_for(body))
    assert decode_record(event.key, event.value(), event.headers()) == event


def test_unknown_extra_keys_are_tolerated(
    connector: MonteCarloConnector, request_for: Request, fixture_body: Body
) -> None:
    body = json.loads(_body(fixture_body, brand_new={"x": 1}))
    body["something_new"] = [1, 2, 3]
    assert _events(connector, request_for(json.dumps(body).encode()))


# --- config and registry ----------------------------------------------------------------------------------------------


def test_the_plugin_is_registered() -> None:
    assert registry.get("montecarlo") is MonteCarloConnector
    schema = registry.config_schema("montecarlo")
    assert set(schema["required"]) == {"default_platform", "default_instance"}
    assert "secret" not in json.dumps(schema).lower()  # secrets are handed to verify, never configured here


@pytest.mark.parametrize(
    "changes",
    [
        {"default_platform": "Snow Flake"},
        {"default_instance": ""},
        {"warehouses": {"abc": {"platform": "BigQuery", "instance": "x"}}},
        {"warehouses": {"abc": {"platform": "bigquery", "instance": "x", "extra": 1}}},
        {"warehouses": {"ABC": {"platform": "bigquery", "instance": "x"}, "abc": {"platform": "pg", "instance": "y"}}},
        {"typo_key": 1},
    ],
)
def test_invalid_config(changes: dict[str, Any], config_values: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        MonteCarloConfig.model_validate({**config_values, **changes})


def test_warehouse_uuids_are_case_insensitive(config_values: dict[str, Any]) -> None:
    config = MonteCarloConfig.model_validate(
        {**config_values, "warehouses": {" ABCDEF ": {"platform": "bigquery", "instance": "x"}}}
    )
    target = config.target_for("abcdef")
    assert target is not None
    assert (target.platform, target.instance) == ("bigquery", "x")
    assert config.target_for("unknown") is None
    assert config.target_for(None) == config.default_target


def test_config_without_warehouses(request_for: Request, fixture_body: Body) -> None:
    config = MonteCarloConfig(default_platform="redshift", default_instance="main")
    connector = MonteCarloConnector(config, ConnectorContext("acme", "mc"))
    [event] = _events(connector, request_for(fixture_body("open_anomaly")))
    assert event.subject == "urn:metalake:redshift:main/zeus/ares/artemis"
    with pytest.raises(InvalidPayload):  # the MCON names a warehouse this config does not map
        _events(connector, request_for(fixture_body("mcon")))
