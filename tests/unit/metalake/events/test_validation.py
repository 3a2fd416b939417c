"""``data`` validation: the field at fault, and messages that never quote payload values."""

from __future__ import annotations

from typing import Any

import pytest

from metalake.events.registry import UnknownEventType, event_types
from metalake.events.validation import InvalidData, validate_data
from metalake.urn import asset_urn

UPSERT = "io.metalake.asset.upserted.v1"
ADDED = "io.metalake.classification.added.v1"
SECRET = "SECRET-VALUE-123"


@pytest.mark.parametrize("name", [spec.name for spec in event_types()])
def test_examples_pass(name: str, examples: dict[str, dict[str, Any]]) -> None:
    validate_data(name, examples[name])


def test_unknown_type() -> None:
    with pytest.raises(UnknownEventType):
        validate_data("io.metalake.nope.v1", {})


def test_missing_required_property_is_reported_at_the_root() -> None:
    with pytest.raises(InvalidData) as info:
        validate_data("io.metalake.asset.deleted.v1", {"urn": "urn:metalake:pg:prod/db"})
    assert info.value.field == "(root)"
    assert str(info.value) == "data/(root): 'version' is a required property"


def _broken(examples: dict[str, dict[str, Any]], **changes: Any) -> dict[str, Any]:
    return {**examples[UPSERT], **changes}


@pytest.mark.parametrize(
    ("changes", "field", "message"),
    [
        ({"version": SECRET}, "version", "data/version: must satisfy type='integer'"),
        ({"version": -1}, "version", "data/version: must satisfy minimum=0"),
        ({"version": 2**63}, "version", "data/version: must satisfy maximum=9223372036854775807"),
        ({"version": True}, "version", "data/version: must satisfy type='integer'"),
        ({"version": 1.5}, "version", "data/version: must satisfy type='integer'"),
        ({"kind": SECRET}, "kind", "data/kind: must satisfy enum=['database', 'schema', 'table', 'view', 'column']"),
        ({"name": ""}, "name", "data/name: must satisfy minLength=1"),
        ({"owners": SECRET}, "owners", "data/owners: must satisfy type='array'"),
        ({"owners": ["ok", 5]}, "owners/1", "data/owners/1: must satisfy type='string'"),
        ({"owners": [SECRET * 30]}, "owners/0", "data/owners/0: must satisfy maxLength=320"),
        ({"properties": {"rows": 5}}, "properties/rows", "data/properties/rows: must satisfy type='string'"),
        ({"description": 5}, "description", "data/description: must satisfy type=['string', 'null']"),
    ],
)
def test_violation_names_the_field_and_the_rule(
    examples: dict[str, dict[str, Any]], changes: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(InvalidData) as info:
        validate_data(UPSERT, _broken(examples, **changes))
    assert info.value.field == field
    assert str(info.value) == message
    assert SECRET not in str(info.value)


def test_urn_pattern_violation_does_not_quote_the_value(examples: dict[str, dict[str, Any]]) -> None:
    with pytest.raises(InvalidData) as info:
        validate_data(UPSERT, _broken(examples, urn=SECRET))
    assert info.value.field == "urn"
    assert str(info.value).startswith("data/urn: must satisfy pattern=")
    assert SECRET not in str(info.value)


def test_tag_pattern(examples: dict[str, dict[str, Any]]) -> None:
    with pytest.raises(InvalidData) as info:
        validate_data(ADDED, {**examples[ADDED], "tag": f"1{SECRET}"})
    assert info.value.field == "tag"
    assert SECRET not in str(info.value)


def test_confidence_range(examples: dict[str, dict[str, Any]]) -> None:
    with pytest.raises(InvalidData) as info:
        validate_data(ADDED, {**examples[ADDED], "confidence": 1.5})
    assert str(info.value) == "data/confidence: must satisfy maximum=1"


def test_additional_property_names_the_key(examples: dict[str, dict[str, Any]]) -> None:
    with pytest.raises(InvalidData) as info:
        validate_data(UPSERT, _broken(examples, colour="blue"))
    assert info.value.field == "(root)"
    assert "'colour' was unexpected" in str(info.value)
    assert "blue" not in str(info.value)


@pytest.mark.parametrize(
    "path",
    [
        ("db",),
        ("my db", "a/b"),
        ("db", "sch:ema", "t%1"),
        ("db", "sch", "tbl", "col umn"),
    ],
)
def test_every_urn_the_urn_module_builds_passes_the_schema(path: tuple[str, ...]) -> None:
    urn = asset_urn("snow-flake_2", "acct:eu/1", *path)
    validate_data("io.metalake.asset.deleted.v1", {"urn": urn, "version": 0})


@pytest.mark.parametrize(
    "urn",
    [
        "urn:metalake:pg:prod",
        "urn:metalake:pg:prod/a/b/c/d/e",
        "urn:metalake:PG:prod/db",
        "urn:metalake:pg:prod/db//t",
        "urn:other:pg:prod/db",
    ],
)
def test_schema_rejects_urns_the_urn_module_rejects(urn: str) -> None:
    with pytest.raises(InvalidData) as info:
        validate_data("io.metalake.asset.deleted.v1", {"urn": urn, "version": 0})
    assert info.value.field == "urn"
