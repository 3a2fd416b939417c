"""The walking skeleton on the real stack: publish -> Kafka -> Spark -> Delta -> MongoDB and Trino."""

from __future__ import annotations

import time
import uuid
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer, RawRecord
from metalake.urn import asset_urn
from ops.settings import Settings
from tenants.naming import names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

SOURCE = "/tests/integration"


def _publish(settings: Settings, events: list[CloudEvent]) -> None:
    def topic_for(e: CloudEvent) -> str:
        return names_for(e.tenantid, settings.lake_root).topic(spec_for(e.type).topic_class(e.data))

    with EventProducer(settings) as producer:
        deliveries = producer.publish(events, topic_for)
    assert len(deliveries) == len(events)


def _upsert(tenant: str, urn: str, version: int, **data: Any) -> CloudEvent:
    return new_event("io.metalake.asset.upserted.v1", tenant, {"urn": urn, "version": version, **data}, source=SOURCE)


def test_event_reaches_delta_mongodb_and_trino(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], trino_cursor: Any
) -> None:
    table = asset_urn("postgres", "it", "shop", "public", "orders")
    column = f"{table}/email"
    _publish(
        settings,
        [
            _upsert(tenant, table, 100, kind="table", name="orders", description="Orders", owners=["a@x.example"]),
            _upsert(tenant, column, 100, kind="column", name="email", data_type="text"),
        ],
    )
    names = names_for(tenant, settings.lake_root)
    assets = mongo[names.mongo_database]["assets"]
    wait_for("both assets in MongoDB", lambda: assets.count_documents({}) == 2 or None)
    doc = assets.find_one({"_id": table})
    assert doc is not None
    assert (doc["kind"], doc["name"], doc["description"], doc["owners"]) == (
        "table",
        "orders",
        "Orders",
        ["a@x.example"],
    )
    assert (doc["platform"], doc["qualified_name"], doc["version"], doc["deleted"]) == (
        "postgres",
        "shop.public.orders",
        100,
        False,
    )

    schema = schema_of(names)
    rows = wait_for(
        "both assets in Trino",
        lambda: (
            (
                r := trino_rows(
                    trino_cursor, f'SELECT urn, kind, name, data_type, version FROM "{schema}".assets ORDER BY urn'
                )
            )
            and len(r) == 2
            and r
        ),
    )
    assert rows == [(table, "table", "orders", None, 100), (column, "column", "email", "text", 100)]
    events = trino_rows(
        trino_cursor,
        f'SELECT event_type, subject, kafka_topic FROM "{schema}".events '
        "WHERE source = '/tests/integration' ORDER BY subject",
    )
    assert events == [
        ("io.metalake.asset.upserted.v1", table, "metalake.events.priority"),
        ("io.metalake.asset.upserted.v1", column, "metalake.events.bulk"),
    ]


def test_invalid_record_goes_to_the_tenant_dlq_and_the_job_keeps_running(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], trino_cursor: Any
) -> None:
    bad_value = b'{"urn": "urn:metalake:postgres:it/shop/public/t", "kind": "table", "name": "t"}'
    headers = [
        ("content-type", b"application/json"),
        ("ce_specversion", b"1.0"),
        ("ce_id", str(uuid.uuid4()).encode()),
        ("ce_source", SOURCE.encode()),
        ("ce_type", b"io.metalake.asset.upserted.v1"),
        ("ce_tenantid", tenant.encode()),
    ]
    with EventProducer(settings) as producer:
        producer.publish_raw(
            [RawRecord("metalake.events.priority", "bad", f"{tenant}:bad".encode(), bad_value, headers)]
        )
    names = names_for(tenant, settings.lake_root)
    schema = schema_of(names)
    dlq = wait_for(
        "the dead letter in Trino",
        lambda: trino_rows(trino_cursor, f'SELECT reason, field, raw_value, kafka_topic FROM "{schema}"."_dlq"'),
    )
    assert len(dlq) == 1
    reason, field, raw_value, topic = dlq[0]
    assert (reason, field, bytes(raw_value), topic) == (
        "data/(root): 'version' is a required property",
        "data/(root)",
        bad_value,
        "metalake.events.priority",
    )
    # The stream is still up: a valid event sent afterwards lands.
    urn = asset_urn("postgres", "it", "shop", "public", "after_poison")
    _publish(settings, [_upsert(tenant, urn, 1, kind="table", name="after_poison")])
    assets = mongo[names.mongo_database]["assets"]
    wait_for("the valid event after the poison record", lambda: assets.find_one({"_id": urn}))


def test_newest_version_wins_whatever_the_arrival_order(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], trino_cursor: Any
) -> None:
    urn = asset_urn("postgres", "it", "shop", "public", "versions")
    newest = _upsert(tenant, urn, 300, kind="table", name="versions", description="v300")
    older = _upsert(tenant, urn, 200, kind="table", name="versions", description="v200")
    _publish(settings, [newest])
    names = names_for(tenant, settings.lake_root)
    assets = mongo[names.mongo_database]["assets"]
    wait_for("v300 in MongoDB", lambda: assets.find_one({"_id": urn, "version": 300}))
    # The stale version and a redelivery of the newest arrive later, in their own batches.
    _publish(settings, [older])
    _publish(settings, [newest])
    marker = asset_urn("postgres", "it", "shop", "public", "marker")
    _publish(settings, [_upsert(tenant, marker, 1, kind="table", name="marker")])
    wait_for("the marker after the stale events", lambda: assets.find_one({"_id": marker}))
    time.sleep(0.5)
    doc = assets.find_one({"_id": urn})
    assert doc is not None and (doc["version"], doc["description"]) == (300, "v300")
    schema = schema_of(names)
    # MongoDB leads Delta (the projection queries do not wait for the lake query): wait for the lake's batch too.
    sql = f'SELECT version, description FROM "{schema}".assets WHERE urn = ?'
    wait_for("v300 in Delta", lambda: trino_rows(trino_cursor, sql, [urn]) == [(300, "v300")] or None, timeout_s=180)
