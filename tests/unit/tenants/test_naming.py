"""Every physical name derived from a tenant id, and the tenant id rules themselves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tenants.naming import (
    BULK_TOPIC,
    CONTROL_DATABASE,
    DELTA_TABLES,
    PRIORITY_TOPIC,
    InvalidTenantId,
    dlq_topic,
    event_topics,
    names_for,
    unrouted_lake_dir,
    validate_tenant_id,
)

LAKE = Path("/lake")


@pytest.mark.parametrize(
    "tenant_id",
    ["abc", "a" * 40, "acme", "acme-corp", "a1-2", "x9z", "a--b", "abc-"],
)
def test_valid_tenant_ids(tenant_id: str) -> None:
    assert validate_tenant_id(tenant_id) == tenant_id


@pytest.mark.parametrize(
    "tenant_id",
    [
        "ab",  # 2 characters
        "a" * 41,  # 41 characters
        "",
        "Acme",
        "acmE",
        "acme_corp",
        "1acme",
        "-acme",
        "acme corp",
        "acme.corp",
        "acmé",
        "acme\n",
    ],
)
def test_invalid_tenant_ids(tenant_id: str) -> None:
    with pytest.raises(InvalidTenantId):
        validate_tenant_id(tenant_id)


def test_non_string_tenant_id_is_rejected() -> None:
    with pytest.raises(InvalidTenantId):
        validate_tenant_id(123)  # type: ignore[arg-type]


def test_invalid_tenant_id_is_a_value_error_naming_the_rule() -> None:
    with pytest.raises(ValueError, match="3-40 characters"):
        validate_tenant_id("ab")


def test_names_for_validates_the_id() -> None:
    with pytest.raises(InvalidTenantId):
        names_for("Bad_Id", LAKE)


def test_pooled_tenants_share_the_event_topics() -> None:
    names = names_for("acme", LAKE)
    assert names.dedicated is False
    assert names.priority_topic == PRIORITY_TOPIC == "metalake.events.priority"
    assert names.bulk_topic == BULK_TOPIC == "metalake.events.bulk"
    assert names_for("other-co", LAKE).topic("bulk") == "metalake.events.bulk"


def test_dedicated_tenants_get_their_own_topics() -> None:
    names = names_for("acme-corp", LAKE, dedicated=True)
    assert names.priority_topic == "metalake.tenant.acme-corp.events.priority"
    assert names.bulk_topic == "metalake.tenant.acme-corp.events.bulk"
    assert names.topic("priority") == names.priority_topic


def test_event_topics_in_priority_order() -> None:
    assert event_topics() == ("metalake.events.priority", "metalake.events.bulk")


@pytest.mark.parametrize(
    ("stage", "topic"),
    [
        ("connectors", "metalake.connectors.dlq"),
        ("outbound", "metalake.outbound.dlq"),
    ],
)
def test_dlq_topic_per_stage(stage: str, topic: str) -> None:
    assert dlq_topic(stage) == topic  # type: ignore[arg-type]


def test_partition_key_prefix() -> None:
    assert names_for("acme", LAKE).partition_key_prefix == "acme:"


def test_lake_paths() -> None:
    names = names_for("acme", Path("/data/lake"))
    assert names.lake_dir == Path("/data/lake/acme")
    assert names.delta_path("assets") == Path("/data/lake/acme/assets")
    assert names.delta_path("_dlq") == Path("/data/lake/acme/_dlq")
    assert [names.delta_path(t).name for t in DELTA_TABLES] == list(DELTA_TABLES)


def test_delta_tables() -> None:
    assert DELTA_TABLES == (
        "events",
        "assets",
        "lineage_edges",
        "classifications",
        "incidents",
        "propagated_tags",
        "asset_edits",
        "audit",
        "_dlq",
    )


@pytest.mark.parametrize("table", ["unknown", "dlq", "Assets", "../assets", ""])
def test_delta_path_of_an_unknown_table_is_a_key_error(table: str) -> None:
    with pytest.raises(KeyError, match="unknown Delta table"):
        names_for("acme", LAKE).delta_path(table)


def test_trino_table_is_the_delta_folder_name_and_checked() -> None:
    names = names_for("acme", LAKE)
    assert names.trino_table("lineage_edges") == "lineage_edges"
    with pytest.raises(KeyError):
        names.trino_table("nope")


def test_mongo_database() -> None:
    assert names_for("acme-corp", LAKE).mongo_database == "metalake_acme-corp"


def test_no_tenant_can_take_the_control_plane_database() -> None:
    # `metalake_<tenant>` for a tenant called "control" would be the control plane's database.
    with pytest.raises(InvalidTenantId):
        names_for("control", LAKE)
    assert CONTROL_DATABASE == "metalake_control"


def test_checkpoint_dir() -> None:
    names = names_for("acme", LAKE)
    assert names.checkpoint_dir(Path("/ckpt"), "enrich") == Path("/ckpt/acme/enrich")


def test_unrouted_dir_cannot_be_a_tenant() -> None:
    path = unrouted_lake_dir(Path("/lake"))
    assert path == Path("/lake/_unrouted")
    with pytest.raises(InvalidTenantId):
        validate_tenant_id(path.name)


def test_pooled_tenant_tables_are_its_rows_of_the_shared_tables() -> None:
    from tenants.naming import POOLED_BUCKETS, tenant_bucket

    table = names_for("acme", LAKE).table("assets")
    assert table.path == LAKE / "_pooled" / "assets"
    assert table.shared and table.tenant_id == "acme"
    assert table.bucket == tenant_bucket("acme") and 0 <= table.bucket < POOLED_BUCKETS
    assert table.predicate == f"tenant_bucket = {table.bucket} AND tenant_id = 'acme'"
    assert table.where("urn = 'x'") == f"{table.predicate} AND (urn = 'x')"


def test_dedicated_tables_and_every_audit_table_are_the_tenants_own() -> None:
    own = names_for("acme", LAKE, dedicated=True).table("assets")
    assert own.path == LAKE / "acme" / "assets" and not own.shared and own.predicate is None
    assert own.where("urn = 'x'") == "urn = 'x'"
    assert names_for("acme", LAKE).table("audit").path == LAKE / "acme" / "audit"


def test_tenant_bucket_matches_sparks_crc32_modulo() -> None:
    import zlib

    from tenants.naming import POOLED_BUCKETS, tenant_bucket

    # Spark SQL: pmod(crc32(tenant_id), 16); crc32 is unsigned there as in zlib.
    assert tenant_bucket("acme") == zlib.crc32(b"acme") % POOLED_BUCKETS
    assert len({tenant_bucket(f"t-{i:03d}") for i in range(200)}) == POOLED_BUCKETS
