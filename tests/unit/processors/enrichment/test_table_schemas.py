"""Delta table schemas follow the state specs; ``ensure_tables`` creates them and adds the columns a newer spec has
(delta-rs commits on a folder of the test's: no Spark, no service)."""

from __future__ import annotations

import dataclasses
import threading
from pathlib import Path

import pytest
from deltalake import DeltaTable
from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

from processors.enrichment.health import HEALTH_COLUMNS
from processors.enrichment.state import CLASSIFICATIONS, STATE_SPECS
from processors.enrichment.tables import (
    SCHEMAS,
    TABLES,
    Layout,
    TableSpec,
    ensure_tables,
    held_schema,
    missing_columns,
    source_schema,
    state_table,
    typed,
)
from tenants.naming import names_for


def test_every_state_spec_has_a_table_with_its_columns_and_assets_keep_their_health() -> None:
    names = [t.name for t in TABLES]
    assert names[0] == "events" and names[-1] == "_dlq"
    for spec in STATE_SPECS:
        assert spec.table in names
        assert SCHEMAS[spec.table].fieldNames()[: len(spec.columns)] == list(spec.columns)
        assert source_schema(spec).fieldNames() == list(spec.columns)
    assert SCHEMAS["assets"].fieldNames()[-len(HEALTH_COLUMNS) :] == list(HEALTH_COLUMNS)
    assert all(f.nullable for t in TABLES for f in t.schema.fields)


def test_a_field_added_to_a_spec_becomes_a_column_of_its_table() -> None:
    newer = dataclasses.replace(CLASSIFICATIONS, fields=(*CLASSIFICATIONS.fields, "propagation"))
    assert state_table(newer).schema["propagation"].dataType == StringType()


def test_a_spec_field_without_a_type_fails_naming_it() -> None:
    newer = dataclasses.replace(CLASSIFICATIONS, fields=(*CLASSIFICATIONS.fields, "mystery"))
    with pytest.raises(KeyError, match="mystery"):
        state_table(newer)


def test_missing_columns_are_the_new_ones_in_spec_order_and_ignore_case() -> None:
    held = StructType([StructField("URN", StringType()), StructField("version", LongType())])
    wanted = typed(("urn", "version", "open_incidents", "open_incident_ids", "health"))
    assert [f.name for f in missing_columns(held, wanted)] == ["open_incidents", "open_incident_ids", "health"]
    assert missing_columns(wanted, wanted) == []


def test_a_column_held_with_another_type_is_not_altered() -> None:
    held = StructType([StructField("propagate", StringType())])
    assert missing_columns(held, StructType([StructField("propagate", BooleanType())])) == []


def _dedicated(tmp_path: Path) -> Layout:
    return Layout(tmp_path, names_for("acme", tmp_path, dedicated=True))


def test_ensure_tables_creates_each_table_with_its_schema_partitions_and_no_deletion_vectors(tmp_path: Path) -> None:
    layout = _dedicated(tmp_path)

    assert ensure_tables(layout.tables(), None) == {}

    for spec, path in layout.tables():
        table = DeltaTable(str(path))
        assert held_schema(table) == spec.schema, spec.name
        assert table.metadata().partition_columns == list(spec.partition_by)
        assert table.metadata().configuration == {"delta.enableDeletionVectors": "false"}
        assert (table.protocol().min_reader_version, table.protocol().min_writer_version) == (1, 2)


def test_ensure_tables_again_commits_nothing(tmp_path: Path) -> None:
    layout = _dedicated(tmp_path)
    ensure_tables(layout.tables(), None)

    assert ensure_tables(layout.tables(), None) == {}

    assert {DeltaTable(str(path)).version() for _, path in layout.tables()} == {0}


def test_columns_a_newer_spec_has_are_added_and_old_ones_kept(tmp_path: Path) -> None:
    spec = next(t for t in TABLES if t.name == "assets")
    older = TableSpec(spec.name, StructType(spec.schema.fields[:3]))
    path = tmp_path / "assets"
    ensure_tables([(older, path)], None)

    added = ensure_tables([(spec, path)], None)

    assert added == {"assets": spec.schema.fieldNames()[3:]}
    assert held_schema(DeltaTable(str(path))) == spec.schema
    assert DeltaTable(str(path)).version() == 1


def test_creators_racing_on_one_layout_all_succeed(tmp_path: Path) -> None:
    layout = _dedicated(tmp_path)
    errors: list[BaseException] = []

    def create() -> None:
        try:
            ensure_tables(layout.tables(), None)
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            errors.append(exc)

    threads = [threading.Thread(target=create) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()

    assert errors == []
    assert all(held_schema(DeltaTable(str(path))) == spec.schema for spec, path in layout.tables())
