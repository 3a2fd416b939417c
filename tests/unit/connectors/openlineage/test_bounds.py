"""A nested ``schema`` facet names every column by its path, so a crafted chain of fields built text quadratic in its
depth (measured ~600x the body) before anything was checked: the mapping now checks names, URNs, nesting and the total
it builds as it goes, and refuses at the JSON pointer where a bound is passed."""

from __future__ import annotations

import copy
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from connectors.openlineage.bounds import MAX_NESTING, InvalidLineage, TooManyEvents, text_budget
from connectors.openlineage.mapping import UPSERTED, body_digest, map_event
from tests._support.runtime_fakes import WRITE_KEY, World

PATH = "/api/v1/lineage"
AUTH = {"Authorization": f"Bearer {WRITE_KEY}"}
EVENT = json.loads((Path(__file__).parent / "payloads" / "dataset_event.json").read_text())
SCHEMA_AT = "/dataset/facets/schema/fields"


def _chain(label: str, depth: int) -> dict[str, Any]:
    """A struct ``depth`` deep whose every level is named ``label``: column names ``label.label.label...``."""
    node: dict[str, Any] = {"name": label, "type": "string"}
    for _ in range(depth - 1):
        node = {"name": label, "type": "struct", "fields": [node]}
    return node


def _event(fields: list[dict[str, Any]]) -> dict[str, Any]:
    event = copy.deepcopy(EVENT)
    event["dataset"]["facets"]["schema"]["fields"] = fields
    return event


def _map(event: dict[str, Any], body: bytes | None = None) -> Any:
    body = body if body is not None else json.dumps(event).encode()
    return map_event(event, "acme", body_digest(body), max_events=100_000, max_text=text_budget(len(body)))


def _peak(event: dict[str, Any], body: bytes) -> tuple[int, float, BaseException | None]:
    tracemalloc.start()
    started = time.monotonic()
    refused: BaseException | None = None
    try:
        _map(event, body)
    except (InvalidLineage, TooManyEvents) as exc:
        refused = exc
    finally:
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    return peak, time.monotonic() - started, refused


def test_a_wide_forest_of_deep_structs_is_refused_with_memory_bounded_by_the_body() -> None:
    # 200 chains, each within the nesting bound and each name within the name bound: every single value is fine, but
    # together they name 6400 columns of up to 1024 characters from a body of ~0.5 MB (built whole: ~70x the body).
    event = _event([_chain(f"{k:031d}", MAX_NESTING) for k in range(200)])
    body = json.dumps(event).encode()
    peak, took, refused = _peak(event, body)
    assert isinstance(refused, TooManyEvents), refused
    assert refused.pointer.startswith(SCHEMA_AT + "/")
    assert peak < 16 * len(body), f"peak {peak} bytes for a body of {len(body)}"
    assert took < 10


def test_a_chain_deeper_than_the_bound_is_refused_at_its_pointer_before_its_names_are_built() -> None:
    # 400 levels of 200-character names: ~100 KB of body naming columns of up to 80 KB each (16 MB of names).
    event = _event([_chain("c" * 200, 400)])
    body = json.dumps(event).encode()
    peak, _, refused = _peak(event, body)
    assert isinstance(refused, InvalidLineage)
    assert refused.pointer.startswith(SCHEMA_AT + "/0/fields/0/") and refused.pointer.endswith("/name")
    assert peak < 4 * len(body)


def test_nesting_deeper_than_the_bound_is_refused_at_the_field() -> None:
    with pytest.raises(InvalidLineage) as err:
        _map(_event([_chain("a", MAX_NESTING + 1)]))
    assert err.value.pointer == SCHEMA_AT + "/0" + "/fields/0" * MAX_NESTING
    assert f"more than {MAX_NESTING} deep" in str(err.value)


def test_a_normal_nested_facet_still_maps_every_level() -> None:
    address = {
        "name": "address",
        "type": "struct",
        "fields": [
            {"name": "city", "type": "varchar"},
            {"name": "geo", "type": "struct", "fields": [_chain("lat", 1)]},
        ],
    }
    mapped = _map(_event([{"name": "id", "type": "int4"}, address, _chain("deep", MAX_NESTING)]))
    names = {e.data["name"] for e in mapped.events if e.type == UPSERTED and e.data["kind"] == "column"}
    assert {"id", "address", "address.city", "address.geo", "address.geo.lat"} <= names
    assert ".".join(["deep"] * MAX_NESTING) in names
    assert mapped.columns == 5 + MAX_NESTING


def test_a_column_urn_over_the_event_bound_is_refused_where_it_is_named() -> None:
    # 300 characters that each percent-encode to 9: a name within 1024 characters, a URN over 2048.
    with pytest.raises(InvalidLineage) as err:
        _map(_event([{"name": "€" * 300, "type": "int4"}]))
    assert err.value.pointer == SCHEMA_AT + "/0"
    assert "over 2048" in str(err.value)


def test_the_route_answers_413_naming_where_it_stopped_and_publishes_nothing(client: TestClient, world: World) -> None:
    event = _event([_chain(f"{k:031d}", MAX_NESTING) for k in range(200)])
    response = client.post(PATH, json=event, headers=AUTH)
    assert response.status_code == 413, response.text
    problem = response.json()
    assert problem["type"] == "/problems/too-many-events" and problem["field"].startswith(SCHEMA_AT + "/")
    assert "names and URNs" in problem["detail"]
    assert world.publisher.routed == []


def test_the_route_answers_400_for_a_chain_too_deep(client: TestClient, world: World) -> None:
    response = client.post(PATH, json=_event([_chain("a", MAX_NESTING + 1)]), headers=AUTH)
    assert response.status_code == 400, response.text
    assert response.json()["field"] == SCHEMA_AT + "/0" + "/fields/0" * MAX_NESTING
    assert world.publisher.routed == []
