"""Single-message transforms and the chain: stamp tenant, rename, filter, route."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from connectors.runtime.transforms import (
    Chain,
    FilterType,
    RenameField,
    RouteTopicClass,
    StampTenant,
    TransformError,
)
from control.connectors.transforms import TRANSFORM_SPECS
from metalake.events import CloudEvent, new_event
from metalake.urn import asset_urn

URN = asset_urn("pg", "prod", "shop", "public", "orders")


def _event(tenant: str = "acme", kind: str = "table", **data: object) -> CloudEvent:
    return new_event(
        "io.metalake.asset.upserted.v1",
        tenant,
        {"urn": URN, "version": 1, "kind": kind, "name": "orders", **data},
        source="/tests",
    )


def test_stamp_tenant_rewrites_tenant_and_key_prefix() -> None:
    stamped = StampTenant("beta").apply(_event("acme"))
    assert stamped.tenantid == "beta"
    assert stamped.partitionkey == f"beta:{URN}"


def test_stamp_tenant_leaves_a_consistent_event_alone() -> None:
    event = _event("acme")
    assert StampTenant("acme").apply(event) is event


def test_stamp_tenant_prefixes_a_foreign_key() -> None:
    event = _event("acme").model_copy(update={"partitionkey": "incident-7"})
    assert StampTenant("acme").apply(event).partitionkey == "acme:incident-7"


def test_rename_moves_a_data_field() -> None:
    renamed = RenameField("name", "title").apply(_event())
    assert "name" not in renamed.data and renamed.data["title"] == "orders"
    assert RenameField("absent", "x").apply(_event()).data == _event().data


def test_rename_onto_an_existing_field_is_an_error() -> None:
    with pytest.raises(TransformError) as err:
        RenameField("name", "kind").apply(_event())
    assert err.value.field == "data/kind"


@pytest.mark.parametrize(
    ("pattern", "mode", "kept"),
    [
        ("io.metalake.asset.*", "drop", False),
        ("io.metalake.lineage.*", "drop", True),
        ("io.metalake.asset.*", "keep", True),
        ("*.lineage.*", "keep", False),
    ],
)
def test_filter_by_type_glob(pattern: str, mode: str, kept: bool) -> None:
    result = FilterType(pattern, mode).apply(_event())  # type: ignore[arg-type]
    assert (result is not None) == kept


def test_route_overrides_the_topic_class() -> None:
    chain = Chain("acme", [RouteTopicClass("io.metalake.asset.*", "bulk")])
    routed = chain.run(_event())
    assert routed is not None and routed.topic_class == "bulk"


def test_the_type_decides_the_class_without_a_route() -> None:
    chain = Chain("acme")
    table, column = chain.run(_event()), chain.run(_event(kind="column"))
    assert table is not None and table.topic_class == "priority"
    assert column is not None and column.topic_class == "bulk"


def test_chain_from_config_stamps_first_then_runs_in_order() -> None:
    specs = TRANSFORM_SPECS.validate_python(
        [
            {"type": "rename", "from": "description", "to": "summary"},
            {"type": "filter", "pattern": "io.metalake.lineage.*"},
            {"type": "route", "pattern": "io.metalake.asset.*", "topic_class": "bulk"},
        ]
    )
    routed = Chain.from_specs("beta", specs).run(_event("acme"))
    assert routed is not None
    assert routed.event.tenantid == "beta" and routed.topic_class == "bulk"
    dropping = Chain.from_specs("beta", TRANSFORM_SPECS.validate_python([{"type": "filter", "pattern": "*"}]))
    assert dropping.run(_event()) is None


def test_unknown_transform_types_are_refused() -> None:
    with pytest.raises(ValidationError):
        TRANSFORM_SPECS.validate_python([{"type": "exec", "code": "rm -rf /"}])


def test_specs_round_trip_with_aliases() -> None:
    specs = TRANSFORM_SPECS.validate_python([{"type": "rename", "from": "a", "to": "b"}])
    assert [s.model_dump(by_alias=True) for s in specs] == [{"type": "rename", "from": "a", "to": "b"}]
