"""The OpenAPI document says what the routes take and give where FastAPI cannot see it: the OPA decision routes' body
(read by the route itself) and their answers, an asset's health, a lineage node without a name, and every scope."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from api.schemas.engines import OPA_ANSWERS
from control.auth.principal import Scope
from tests._support.api_app import build_app

DOCS = Path(__file__).resolve().parents[3] / "docs"


@pytest.fixture(scope="module")
def document() -> dict[str, Any]:
    app, _ = build_app()
    return app.openapi()


def _resolve(document: dict[str, Any], ref: str) -> dict[str, Any]:
    schema: dict[str, Any] = document["components"]["schemas"][ref.rsplit("/", 1)[1]]
    return schema


def test_every_opa_decision_documents_trinos_request_and_its_answer(document: dict[str, Any]) -> None:
    decisions = sorted(p.rsplit("/", 1)[1] for p in document["paths"] if p.startswith("/v1/opa/{key}/"))
    assert decisions == sorted(OPA_ANSWERS)
    for decision in decisions:
        operation = document["paths"][f"/v1/opa/{{key}}/{decision}"]["post"]
        body = operation["requestBody"]["content"]["application/json"]["schema"]
        query = _resolve(document, body["$ref"])
        assert query["required"] == ["input"]
        # The nested models are components too: every reference resolves.
        action = _resolve(
            document, _resolve(document, query["properties"]["input"]["$ref"])["properties"]["action"]["$ref"]
        )
        assert {"operation", "resource", "filterResources"} <= set(action["properties"])
        answer = _resolve(document, operation["responses"]["200"]["content"]["application/json"]["schema"]["$ref"])
        assert "result" in answer["properties"], decision
        assert {"400", "401", "429", "503"} <= set(operation["responses"]), decision  # the per-address throttle too


def test_an_assets_health_is_in_its_schema(document: dict[str, Any]) -> None:
    properties = document["components"]["schemas"]["AssetView"]["properties"]
    health = {"health", "health_severity", "open_incidents", "open_incident_ids", "health_updated_at"}
    assert health <= set(properties)
    assert "degraded" in properties["health"]["description"]


def test_a_lineage_node_says_when_it_has_no_name(document: dict[str, Any]) -> None:
    node = document["components"]["schemas"]["LineageNode"]["properties"]
    assert "Null when no live asset describes the URN" in node["name"]["description"]


def test_every_scope_is_described(document: dict[str, Any]) -> None:
    described = set(re.findall(r"`([a-z-]+:[a-z]+)`", document["info"]["description"]))
    assert described >= {s.value for s in Scope}


def test_api_md_lists_every_scope() -> None:
    text = (DOCS / "api.md").read_text("utf-8")
    table = text[text.index("| scope | allows |") :].split("\n\n", 1)[0]
    assert set(re.findall(r"^\| `([a-z-]+:[a-z]+)` \|", table, re.MULTILINE)) == {s.value for s in Scope}
