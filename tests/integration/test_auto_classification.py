"""Columns are classified by rules as they stream in, and a person's decision is never overwritten."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer
from metalake.urn import asset_urn
from ops.settings import Settings
from tenants.naming import names_for
from tests._support.itest import trino_rows, wait_for
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration


def test_columns_get_auto_tags_but_human_decisions_stand(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], trino_cursor: Any
) -> None:
    table = asset_urn("postgres", "it", "crm", "public", "customers")

    def column(name: str, data_type: str) -> CloudEvent:
        data = {"urn": f"{table}/{name}", "version": 10, "kind": "column", "name": name, "data_type": data_type}
        return new_event("io.metalake.asset.upserted.v1", tenant, data, source="/tests/classify")

    human = new_event(
        "io.metalake.classification.added.v1",
        tenant,
        {
            "urn": f"{table}/email",
            "version": 1,
            "tag": "PII",
            "source": "human",
            "actor": "dpo@acme.example",
            "confidence": 1.0,
        },
        source="/tests/classify",
    )
    names = names_for(tenant, settings.lake_root)
    with EventProducer(settings) as producer:
        producer.publish([human], lambda e: names.priority_topic)
        db = mongo[names.mongo_database]
        wait_for("the human decision", lambda: db["classifications"].find_one({"_id": f"{table}/email|PII"}))
        producer.publish(
            [column("email", "text"), column("phone", "text"), column("id", "bigint")],
            lambda e: names.topic(spec_for(e.type).topic_class(e.data)),
        )
    phone = wait_for(
        "the phone column's automatic tag",
        lambda: db["classifications"].find_one({"_id": f"{table}/phone|PII"}),
        timeout_s=180,
    )
    assert (phone["source"], phone["rule"], phone["confidence"], phone["deleted"]) == ("auto", "phone-name", 0.9, False)
    schema = schema_of(names)
    rows = wait_for(
        "both tags in Delta",
        lambda: (
            (r := trino_rows(trino_cursor, f'SELECT urn, source, rule FROM "{schema}".classifications ORDER BY urn'))
            and len(r) == 2
            and r
        ),
    )
    # The email column matched a rule too, but its tag was decided by a person: it stays theirs, in both stores.
    assert rows == [(f"{table}/email", "human", None), (f"{table}/phone", "auto", "phone-name")]
    email = db["classifications"].find_one({"_id": f"{table}/email|PII"})
    assert email is not None and (email["source"], email["actor"], email["version"]) == ("human", "dpo@acme.example", 1)
    assert db["classifications"].count_documents({}) == 2  # nothing for the id column
