"""Classifications and lineage edges reach their Delta tables and MongoDB collections, version-guarded."""

from __future__ import annotations

from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer
from metalake.urn import asset_urn
from ops.settings import Settings
from tenants.naming import names_for
from tenants.trino_schemas import trino_schema
from tests._support.itest import trino_rows, wait_for

pytestmark = pytest.mark.integration


def _publish(settings: Settings, events: list[CloudEvent]) -> None:
    with EventProducer(settings) as producer:
        producer.publish(
            events, lambda e: names_for(e.tenantid, settings.lake_root).topic(spec_for(e.type).topic_class(e.data))
        )


def test_tags_and_lineage_land_in_delta_and_mongodb(
    settings: Settings, tenant: str, mongo: MongoClient[dict[str, Any]], trino_cursor: Any
) -> None:
    email = asset_urn("postgres", "it", "shop", "public", "customers", "email")
    hashed = asset_urn("postgres", "it", "mart", "public", "customers", "email_hash")

    def event(event_type: str, data: dict[str, Any]) -> CloudEvent:
        return new_event(event_type, tenant, data, source="/tests/state")

    _publish(
        settings,
        [
            event(
                "io.metalake.classification.added.v1",
                {"urn": email, "version": 1, "tag": "PII", "source": "human", "actor": "dpo@acme.example"},
            ),
            event(
                "io.metalake.classification.added.v1",
                {"urn": email, "version": 1, "tag": "GDPR", "source": "auto", "confidence": 0.75, "rule": "name:email"},
            ),
            event(
                "io.metalake.lineage.edge.added.v1",
                {"urn": hashed, "upstream": email, "version": 1, "blocked_tags": ["PII"], "transformation": "sha256"},
            ),
        ],
    )
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    wait_for("both tags in MongoDB", lambda: db["classifications"].count_documents({}) == 2 or None)
    wait_for("the edge in MongoDB", lambda: db["lineage"].find_one({"_id": f"{email}|{hashed}"}))
    # The newer removal wins; the older re-add that arrives after it does not revive the tag.
    _publish(settings, [event("io.metalake.classification.removed.v1", {"urn": email, "version": 3, "tag": "PII"})])
    _publish(
        settings,
        [event("io.metalake.classification.added.v1", {"urn": email, "version": 2, "tag": "PII", "source": "auto"})],
    )
    _publish(settings, [event("io.metalake.lineage.edge.removed.v1", {"urn": hashed, "upstream": email, "version": 2})])
    wait_for(
        "the edge removal in MongoDB", lambda: db["lineage"].find_one({"_id": f"{email}|{hashed}", "deleted": True})
    )
    pii = db["classifications"].find_one({"_id": f"{email}|PII"})
    assert pii is not None and (pii["deleted"], pii["version"], pii["source"], pii["actor"]) == (
        True,
        3,
        "human",
        "dpo@acme.example",
    )

    schema = trino_schema(settings, tenant)
    # MongoDB leads Delta (the projection queries do not wait for the lake query): wait for the removal in Delta.
    wanted = [("GDPR", False, 1, "auto", 0.75), ("PII", True, 3, "human", None)]
    wait_for(
        "the tags in Trino, the removal included",
        lambda: (
            trino_rows(
                trino_cursor,
                f'SELECT tag, deleted, version, source, confidence FROM "{schema}".classifications ORDER BY tag',
            )
            == wanted
            or None
        ),
        timeout_s=180,
    )
    # The tags' MERGE and the edges' MERGE may land in different lake batches: wait for the edge too.
    sql = f'SELECT upstream, urn, blocked_tags, transformation, deleted FROM "{schema}".lineage_edges'
    expected = [(email, hashed, ["PII"], "sha256", True)]
    wait_for("the removed edge in Delta", lambda: trino_rows(trino_cursor, sql) == expected or None, timeout_s=180)
