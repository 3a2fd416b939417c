"""The registry of event types: names, schemas on disk, topic classes."""

from __future__ import annotations

import re
from importlib import resources
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from metalake.events.registry import UnknownEventType, event_types, spec_for

NAMES = [spec.name for spec in event_types()]


def test_the_registered_types() -> None:
    assert NAMES == [
        "io.metalake.asset.upserted.v1",
        "io.metalake.asset.deleted.v1",
        "io.metalake.classification.added.v1",
        "io.metalake.classification.removed.v1",
        "io.metalake.lineage.edge.added.v1",
        "io.metalake.lineage.edge.removed.v1",
        "com.montecarlodata.incident.opened.v1",
        "com.montecarlodata.incident.updated.v1",
        "com.montecarlodata.incident.resolved.v1",
        "io.metalake.classification.propagated.v1",
        "io.metalake.classification.unpropagated.v1",
        "io.metalake.propagation.completed.v1",
        "io.metalake.asset.erased.v1",
        "io.metalake.state.changed.v1",
        "io.metalake.subscription.test.requested.v1",
        "io.metalake.asset.edited.v1",
        "io.metalake.asset.edit.cleared.v1",
    ]


def test_every_schema_file_is_registered() -> None:
    folder = resources.files("metalake.events").joinpath("schemas")
    files = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    assert files == sorted(f"{name}.json" for name in NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_schema_is_valid_draft_2020_12(name: str) -> None:
    schema = spec_for(name).schema
    Draft202012Validator.check_schema(schema)
    assert schema["$schema"] == "https://json-schema.org/draft/2020-12/schema"
    assert schema["$id"] == f"https://metalake.dev/schemas/{name}.json"
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False


# A GDPR erase names its asset by the URN's sha256 only: the erased URN must be stored nowhere, its event included.
ERASED = "io.metalake.asset.erased.v1"


# A state change names its asset in its key (with the rest of the row's key), not in a urn field of its own.
STATE_CHANGED = "io.metalake.state.changed.v1"
# A request to the outbound runtime, about a subscription: no asset, and nothing to order by version.
TEST_REQUESTED = "io.metalake.subscription.test.requested.v1"


@pytest.mark.parametrize("name", [n for n in NAMES if n not in (ERASED, STATE_CHANGED, TEST_REQUESTED)])
def test_every_type_carries_urn_and_version(name: str) -> None:
    schema = spec_for(name).schema
    assert {"urn", "version"} <= set(schema["required"])
    assert schema["properties"]["version"]["type"] == "integer"


def test_a_state_change_carries_its_asset_in_its_key_and_a_version() -> None:
    schema = spec_for(STATE_CHANGED).schema
    assert {"key", "version"} <= set(schema["required"])
    assert schema["properties"]["version"]["type"] == "integer"
    assert schema["properties"]["key"]["required"] == ["urn"]


def test_the_erased_event_carries_a_hash_and_no_urn_field() -> None:
    schema = spec_for(ERASED).schema
    assert {"version", "urn_sha256"} <= set(schema["required"])
    assert schema["properties"]["version"]["type"] == "integer"
    assert not [p for p in schema["properties"].values() if "urn:metalake" in str(p.get("pattern", ""))]


@pytest.mark.parametrize("name", NAMES)
def test_example_is_valid(name: str, examples: dict[str, dict[str, Any]]) -> None:
    assert not list(Draft202012Validator(spec_for(name).schema).iter_errors(examples[name]))


@pytest.mark.parametrize("name", NAMES)
def test_summary(name: str) -> None:
    assert spec_for(name).summary.strip()
    assert spec_for(name).name == name


@pytest.mark.parametrize(
    ("kind", "topic_class"),
    [("column", "bulk"), ("table", "priority"), ("view", "priority"), ("schema", "priority"), ("database", "priority")],
)
def test_asset_upserts_of_columns_ride_the_bulk_topic(kind: str, topic_class: str) -> None:
    assert spec_for("io.metalake.asset.upserted.v1").topic_class({"kind": kind}) == topic_class


@pytest.mark.parametrize("name", NAMES[1:])
def test_other_types_are_always_priority(name: str) -> None:
    assert spec_for(name).topic_class({"kind": "column"}) == "priority"
    assert spec_for(name).topic_class({}) == "priority"


def test_unknown_type() -> None:
    with pytest.raises(UnknownEventType, match=re.escape("unknown event type 'io.metalake.nope.v1'")):
        spec_for("io.metalake.nope.v1")


def test_unknown_type_is_a_lookup_error() -> None:
    with pytest.raises(LookupError):
        spec_for("")
