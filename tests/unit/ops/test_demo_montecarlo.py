"""The demo's Monte Carlo delivery: signed as Monte Carlo signs it, accepted by the connector's own verification,
and resolved through the connector configuration's warehouse map to the demo catalog's table."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest

from connectors.montecarlo import MonteCarloConfig, MonteCarloConnector
from connectors.montecarlo.signature import verify_signature
from control.connectors.plugin import AuthenticationFailed, ConnectorContext, InboundRequest, InvalidPayload, parse_json
from ops.demo import montecarlo
from ops.demo.catalog import demo_catalog


def _connector() -> MonteCarloConnector:
    config = MonteCarloConfig.model_validate(montecarlo.connector_config())
    return MonteCarloConnector(config, ConnectorContext(tenant_id="demo-1", connector_name=montecarlo.CONNECTOR))


def test_the_demo_signature_is_the_one_the_connector_verifies() -> None:
    incident = montecarlo.incident("public", "customers", "0 rows")
    secret = "a-generated-secret-of-the-api"
    headers = montecarlo.signed_headers(secret, incident.body)
    signature = headers[montecarlo.SIGNATURE_HEADER]
    # Not an HMAC of the raw body: Monte Carlo signs urlencode(json.loads(body)); the connector accepts that.
    verify_signature(incident.body, parse_json(incident.body), signature, [secret.encode()])
    with pytest.raises(AuthenticationFailed):
        verify_signature(incident.body, parse_json(incident.body), signature, [b"another-secret-entirely"])
    with pytest.raises(AuthenticationFailed):
        tampered = incident.body.replace(b"0 rows", b"1 rows")
        verify_signature(tampered, parse_json(tampered), signature, [secret.encode()])


def test_the_incident_lands_on_the_demo_catalogs_table_through_the_warehouse_map() -> None:
    incident = montecarlo.incident("public", "customers", "0 rows", incident_id="4d1e2c3b-0000-4000-8000-000000000001")
    assert incident.full_table_id == "shop:public.customers"
    doc = json.loads(incident.body)
    assert montecarlo.WAREHOUSE in doc["payload"]["event_list"][0]["mcon"]
    request = InboundRequest(headers={}, body=incident.body, received_at=datetime(2026, 11, 26, tzinfo=UTC))
    connector = _connector()
    (event,) = connector.to_events(connector.read(request), request)
    catalog = demo_catalog("demo-1", 1)
    assert event.type == "com.montecarlodata.incident.opened.v1"
    assert event.data["urn"] == catalog.customers and event.data["mcon"] is not None
    assert event.data["incident_id"] == incident.incident_id and event.data["summary"] == "0 rows"
    # A warehouse the map does not hold is refused, not guessed: without the demo's entry the MCON does not resolve.
    bare = MonteCarloConfig.model_validate({**montecarlo.connector_config(), "warehouses": {}})
    unmapped = MonteCarloConnector(bare, ConnectorContext(tenant_id="demo-1", connector_name="mc"))
    with pytest.raises(InvalidPayload, match="warehouse"):
        list(unmapped.to_events(unmapped.read(request), request))


def test_each_incident_is_new_unless_its_id_is_given() -> None:
    first, second = (montecarlo.incident("public", "customers", "x") for _ in range(2))
    assert first.incident_id != second.incident_id and first.body != second.body
