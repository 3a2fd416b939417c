"""The webhook delivery log's expiry on the real FerretDB: the TTL index where the server has one, else a pruning
pass that forgets expired deliveries (and those recorded before expiry existed, by age) and keeps live ones."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from pymongo import MongoClient

from connectors.runtime.dedup import COLLECTION, DeliveryLog, delivery_id
from metalake.expiry import EXPIRY_INDEX
from tenants.naming import CONTROL_DATABASE

pytestmark = pytest.mark.integration

Mongo = MongoClient[dict[str, Any]]


def test_the_ttl_index_exists_exactly_where_the_server_has_ttl_indexes(mongo: Mongo) -> None:
    log = DeliveryLog(mongo[CONTROL_DATABASE])
    ttl = log.ensure_expiry()
    assert log.ensure_expiry() == ttl  # idempotent
    indexes = {i["name"]: i for i in mongo[CONTROL_DATABASE][COLLECTION].list_indexes()}
    if ttl:
        assert indexes[EXPIRY_INDEX]["expireAfterSeconds"] == 0
    else:
        assert EXPIRY_INDEX not in indexes
        assert "ferretdb" in str(mongo.admin.command("buildInfo")).lower()


def test_pruning_forgets_expired_deliveries_and_keeps_live_ones(mongo: Mongo, tenant: str) -> None:
    control = mongo[CONTROL_DATABASE]
    short, hour = DeliveryLog(control, timedelta(seconds=1)), DeliveryLog(control, timedelta(hours=1))
    assert short.record(tenant, "mc", "k:old", "accepted", ["e1"])
    assert hour.record(tenant, "mc", "k:live", "accepted", ["e2"])
    # A record written before expiry existed: no expires_at, only recorded_at.
    control[COLLECTION].insert_one(
        {
            "_id": delivery_id(tenant, "mc", "k:legacy"),
            "tenant": tenant,
            "connector": "mc",
            "outcome": "accepted",
            "event_ids": [],
            "recorded_at": datetime.now(UTC) - timedelta(days=30),
        }
    )
    time.sleep(1.5)
    assert hour.prune() >= 2  # other tests' expired records may go too
    assert not hour.seen(tenant, "mc", "k:old") and not hour.seen(tenant, "mc", "k:legacy")
    assert hour.seen(tenant, "mc", "k:live")
    control[COLLECTION].delete_many({"tenant": tenant})
