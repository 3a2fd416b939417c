"""The lake query's executor functions (``mapInArrow``): Kafka records to parsed rows, parsed rows to folded state.

They run here without Spark, on the Arrow batches Spark would hand them; the schemas are checked against the Spark
schemas the job declares for them, since a mismatch only fails at run time on the executors.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from pyspark.sql.types import StructType

from metalake.events import new_event
from processors.enrichment import lake
from processors.enrichment.rows import PARSED, PARSED_COLUMNS, _parsed_row, fold_batches, parse_batches
from processors.enrichment.state import ASSETS, fold
from processors.enrichment.tables import DLQ
from tenants.naming import tenant_bucket

T = datetime(2026, 11, 25, 12, 0, tzinfo=UTC)
NOW = datetime(2026, 11, 25, 12, 5, tzinfo=UTC)
URN = "urn:metalake:postgres:prod/shop/public/orders"
KAFKA = pa.schema(
    [
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))),
        ("topic", pa.string()),
        ("partition", pa.int32()),
        ("offset", pa.int64()),
        ("timestamp", pa.timestamp("us", tz="UTC")),
    ]
)


def _record(tenant: str, version: int, offset: int, **data: Any) -> dict[str, Any]:
    event = new_event(
        "io.metalake.asset.upserted.v1", tenant, {"urn": URN, "version": version, **data}, source="/tests"
    )
    return {
        "key": event.key,
        "value": event.value(),
        "headers": [{"key": k, "value": v} for k, v in event.headers()],
        "topic": "metalake.events.priority",
        "partition": 0,
        "offset": offset,
        "timestamp": T,
    }


def _parse(records: list[dict[str, Any]], only_tenant: str | None = None) -> list[dict[str, Any]]:
    out = parse_batches(only_tenant)(iter([pa.RecordBatch.from_pylist(records, schema=KAFKA)]))
    return [row for batch in out for row in batch.to_pylist()]


def test_a_valid_record_becomes_an_event_row_with_its_tenant_bucket_and_state_key() -> None:
    [row] = _parse([_record("acme", 3, 7, kind="table", name="orders")])
    assert row["valid"] and row["tenant_id"] == "acme" and row["tenant_bucket"] == tenant_bucket("acme")
    assert (row["state_table"], row["state_key"]) == ("assets", URN)
    assert (row["version"], row["kafka_offset"], row["event_date"]) == (3, 7, row["event_time"].date())
    assert json.loads(row["data"])["name"] == "orders"
    assert row["raw_value"] is None  # valid events keep their bytes in Kafka and in events.data


def test_an_invalid_record_is_a_dead_letter_with_its_raw_bytes() -> None:
    bad = _record("acme", 1, 8, kind="table", name="x")
    bad["value"] = b"{not json"
    [row] = _parse([bad])
    assert not row["valid"] and row["reason"] and row["raw_value"] == b"{not json"
    assert row["state_table"] is None


def test_a_dedicated_query_dead_letters_another_tenants_record_without_naming_it() -> None:
    record = _record("someone", 1, 9, kind="table", name="x")
    [row] = _parse([record], only_tenant="acme")
    assert (row["tenant_id"], row["valid"], row["field"]) == ("acme", False, "ce_tenantid")
    assert "someone" not in (row["reason"] or "")
    # The same dead letter as an undecodable record's: the raw key, value and headers as they came.
    assert (row["raw_key"], row["raw_value"]) == (record["key"], record["value"])
    assert json.loads(row["raw_headers"])["ce_tenantid"] == "someone"


def test_a_dedicated_query_dead_letters_an_invalid_record_of_another_tenant_as_foreign() -> None:
    bad = _record("someone", 1, 10, kind="table", name="x")
    bad["value"] = b"{not json"
    [row] = _parse([bad], only_tenant="acme")
    assert (row["tenant_id"], row["field"], row["raw_value"]) == ("acme", "ce_tenantid", b"{not json")
    own = _record("acme", 1, 11, kind="table", name="x")
    own["value"] = b"{not json"
    [mine] = _parse([own], only_tenant="acme")
    assert (mine["tenant_id"], mine["field"]) == ("acme", "data")


def test_every_dead_letter_column_of_the_lake_is_a_parsed_column_of_the_same_type() -> None:
    parsed = dict(PARSED_COLUMNS)
    assert {f.name: f.dataType.simpleString() for f in DLQ.fields if f.name != "ingested_at"} == {
        f.name: parsed[f.name] for f in DLQ.fields if f.name != "ingested_at"
    }


def test_folding_on_executors_gives_what_the_driver_fold_gives() -> None:
    parsed = _parse(
        [
            _record("acme", 1, 1, kind="table", name="old", description="kept"),
            _record("acme", 2, 2, kind="table", name="orders"),
            _record("other-co", 1, 3, kind="table", name="theirs"),
        ]
    )
    schema = lake.FOLDED_ARROW
    out = [
        r
        for b in fold_batches(schema, NOW)(iter([pa.RecordBatch.from_pylist(parsed, schema=PARSED)]))
        for r in b.to_pylist()
    ]
    by_tenant = {r["tenant_id"]: r for r in out}
    assert set(by_tenant) == {"acme", "other-co"}
    acme = by_tenant["acme"]
    assert (acme["name"], acme["description"], acme["version"], acme["state_table"]) == ("orders", "kept", 2, "assets")
    assert acme["tenant_bucket"] == tenant_bucket("acme")
    # The same fold as the projection's (state.fold) on the same events.
    rows = [r for r in parsed if r["tenant_id"] == "acme"]
    [expected] = fold(ASSETS, [_parsed_row(r) for r in rows], NOW)
    assert {k: acme[k] for k in expected} == expected


def test_the_arrow_schemas_match_the_spark_schemas_the_job_declares() -> None:
    def names(schema: StructType) -> list[str]:
        return schema.fieldNames()

    assert PARSED.names == names(lake.PARSED_SPARK)
    assert lake.FOLDED_ARROW.names == names(lake.FOLDED_SPARK)
