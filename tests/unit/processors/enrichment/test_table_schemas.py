"""Delta table schemas follow the state specs; the columns a newer spec adds are found and added by DDL."""

from __future__ import annotations

import dataclasses

import pytest
from pyspark.sql.types import ArrayType, BooleanType, IntegerType, LongType, StringType, StructField, StructType

from processors.enrichment.health import HEALTH_COLUMNS
from processors.enrichment.state import CLASSIFICATIONS, STATE_SPECS
from processors.enrichment.tables import (
    SCHEMAS,
    TABLES,
    add_columns_sql,
    missing_columns,
    source_schema,
    state_table,
    typed,
)


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


def test_add_columns_ddl_names_and_types_each_column() -> None:
    columns = [StructField("open_incidents", IntegerType()), StructField("path", ArrayType(StringType()))]
    assert add_columns_sql("/lake/acme/assets", columns) == (
        "ALTER TABLE delta.`/lake/acme/assets` ADD COLUMNS (`open_incidents` int, `path` array<string>)"
    )
