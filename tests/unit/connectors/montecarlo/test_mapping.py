"""Monte Carlo identifiers: full_table_id and MCON parsing, and which way of naming a table wins."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from connectors.montecarlo import MonteCarloConnector
from connectors.montecarlo.mapping import split_full_table_id, split_mcon
from control.connectors.plugin import InboundRequest, InvalidPayload

ACCOUNT = "9a59c6f1-203a-4c72-8cd7-132db7f21b92"
WAREHOUSE = "5f1c3a7e-0d2b-4c6a-9e8f-112233445566"


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        ("analytics:prod.orders", ("analytics", "prod", "orders")),
        ("my-project:dataset.table.with.dots", ("my-project", "dataset", "table.with.dots")),
        ("db:schema.t:x", ("db", "schema", "t:x")),
        ("analytics:prod", None),
        ("analytics.prod.orders", None),
        (":prod.orders", None),
        ("analytics:.orders", None),
        ("analytics:prod.", None),
        ("analytics: .orders", None),
        ("", None),
    ],
)
def test_split_full_table_id(value: str, parts: tuple[str, str, str] | None) -> None:
    assert split_full_table_id(value) == parts


@pytest.mark.parametrize(
    ("value", "parts"),
    [
        (f"MCON++{ACCOUNT}++{WAREHOUSE}++table++analytics:prod.orders", (WAREHOUSE, "analytics:prod.orders")),
        (f"MCON++{ACCOUNT}++{WAREHOUSE}++view++analytics:prod.v", (WAREHOUSE, "analytics:prod.v")),
        (f"MCON++{ACCOUNT}++{WAREHOUSE}++table++a:b.c++d", (WAREHOUSE, "a:b.c++d")),
        (f"MCON++{ACCOUNT}++{WAREHOUSE}++project++analytics", None),
        (f"MCON++{ACCOUNT}++{WAREHOUSE}++table", None),
        (f"MCON++{ACCOUNT}++ ++table++a:b.c", None),
        (f"NOPE++{ACCOUNT}++{WAREHOUSE}++table++a:b.c", None),
    ],
)
def test_split_mcon(value: str, parts: tuple[str, str] | None) -> None:
    assert split_mcon(value) == parts


def _subjects(connector: MonteCarloConnector, request_for: Callable[..., InboundRequest], **payload: Any) -> list[str]:
    body: dict[str, Any] = {"type": "open_anomaly_incident", "payload": {"incident_id": "i-1", **payload}}
    request = request_for(json.dumps(body).encode())
    return [str(e.subject) for e in connector.to_events(connector.read(request), request)]


def test_mcon_beats_full_table_id_beats_group_and_table_name(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    mcon = f"MCON++{ACCOUNT}++{WAREHOUSE}++table++a:b.from_mcon"
    item = {"table_name": "from_name", "full_table_id": "a:b.from_id", "mcon": mcon}
    assert _subjects(connector, request_for, group_id="a:b", event_list=[item]) == [
        "urn:metalake:bigquery:acme-analytics/a/b/from_mcon"
    ]
    del item["mcon"]
    assert _subjects(connector, request_for, group_id="a:b", event_list=[item]) == [
        "urn:metalake:snowflake:acme-prod/a/b/from_id"
    ]
    del item["full_table_id"]
    assert _subjects(connector, request_for, group_id="a:b", event_list=[item]) == [
        "urn:metalake:snowflake:acme-prod/a/b/from_name"
    ]


def test_a_malformed_identifier_falls_through_to_the_next_way(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    item = {"table_name": "t", "full_table_id": "not-an-id", "mcon": "MCON++x"}
    assert _subjects(connector, request_for, group_id="a:b", event_list=[item]) == [
        "urn:metalake:snowflake:acme-prod/a/b/t"
    ]


def test_table_name_without_group_id_names_no_table(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    with pytest.raises(InvalidPayload) as info:
        _subjects(connector, request_for, group_id=None, event_list=[{"table_name": "artemis"}])
    assert info.value.field == "payload/event_list"


@pytest.mark.parametrize("event_list", [None, []])
def test_no_event_list(
    event_list: list[Any] | None, connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    with pytest.raises(InvalidPayload) as info:
        _subjects(connector, request_for, group_id="a:b", event_list=event_list)
    assert info.value.field == "payload/event_list"


def test_every_comparison_of_a_custom_rule_counts_once(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    comparisons = [
        {"full_table_id": "a:b.one", "warehouse_uuid": WAREHOUSE.upper()},
        {"full_table_id": "a:b.two", "warehouse_uuid": None},
        {"full_table_id": "a:b.one", "warehouse_uuid": WAREHOUSE},
        {"full_table_id": None, "warehouse_uuid": WAREHOUSE},
    ]
    item = {"table_name": None, "rule": {"description": "d", "comparisons": comparisons}}
    assert _subjects(connector, request_for, group_id=None, event_list=[item]) == [
        "urn:metalake:bigquery:acme-analytics/a/b/one",
        "urn:metalake:snowflake:acme-prod/a/b/two",
    ]


def test_unmapped_warehouse_of_a_comparison_names_its_location(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    item = {"rule": {"comparisons": [{"full_table_id": "a:b.c", "warehouse_uuid": "unmapped"}]}}
    with pytest.raises(InvalidPayload) as info:
        _subjects(connector, request_for, event_list=[item])
    assert info.value.field == "payload/event_list/0/rule/comparisons/0/warehouse_uuid"
    assert "unmapped" not in str(info.value)


def test_names_are_percent_encoded_in_the_urn(
    connector: MonteCarloConnector, request_for: Callable[..., InboundRequest]
) -> None:
    item = {"full_table_id": "My DB:sales/eu.orders 2024"}
    assert _subjects(connector, request_for, event_list=[item]) == [
        "urn:metalake:snowflake:acme-prod/My%20DB/sales%2Feu/orders%202024"
    ]
