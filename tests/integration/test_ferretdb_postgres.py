"""FerretDB on the stack's PostgreSQL: a collection created at run time gets the GIN indexes that serve the pushed-down
`_id`, `urn` and `urn_keys` equalities, and the database plans FerretDB's prepared statements with their key."""

from __future__ import annotations

import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
from pymongo import MongoClient
from pymongo.database import Database

from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.services.ferretdb import DATABASE
from processors.enrichment.projection import guarded_upsert
from tests._support.pgit import connect

pytestmark = pytest.mark.integration


@pytest.fixture
def database(mongo: MongoClient[dict[str, Any]]) -> Iterator[Database[dict[str, Any]]]:
    name = f"metalake_it-{secrets.token_hex(4)}"  # the shape of a tenant database
    yield mongo[name]
    mongo.drop_database(name)


def _indexes(settings: Settings, schema: str) -> dict[str, str]:
    with connect(settings, DATABASE) as conn:
        rows = conn.execute("SELECT indexname, indexdef FROM pg_indexes WHERE schemaname = %s", (schema,)).fetchall()
    return dict(rows)


def test_a_new_collection_gets_gin_indexes_on_id_urn_and_urn_keys(
    settings: Settings, stack: StackManager, database: Database[dict[str, Any]]
) -> None:
    database["incidents"].insert_one({"_id": "i1|urn:a", "urn": "urn:a"})
    gin = sorted(d.split(" USING ", 1)[1] for d in _indexes(settings, database.name).values() if "USING gin" in d)
    # Only on the collection's table: FerretDB's own metadata table is left alone.
    assert gin == [
        "gin (((_jsonb -> '_id'::text))) WITH (fastupdate=off)",
        "gin (((_jsonb -> 'urn'::text))) WITH (fastupdate=off)",
        "gin (((_jsonb -> 'urn_keys'::text))) WITH (fastupdate=off)",
    ]


def test_the_guarded_filter_is_pushed_down_to_the_gin_index(
    settings: Settings, stack: StackManager, database: Database[dict[str, Any]]
) -> None:
    assets = database["assets"]
    assets.insert_many([{"_id": f"urn:{i}", "version": 1, "event_id": "a"} for i in range(3000)])
    plan = database.command({"explain": {"find": "assets", "filter": guarded_upsert("urn:7", 2, "b", {})["q"]}})
    assert plan["filterPushdown"] is True
    assert "_gin_id" in json.dumps(plan["queryPlanner"])
    with connect(settings, DATABASE) as conn:
        row = conn.execute("SHOW plan_cache_mode").fetchone()
    assert row is not None and row[0] == "force_custom_plan"
