"""Trino enforcement on the real stack: a tenant's data table, its column tagged PII through an event, masked for
the tenant's plain user, clear for its PII user, invisible to another tenant; regenerated as tags come and go,
direct or propagated.

The access runner (``metalake access run``) runs in a thread of the test with its own consumer group. The tenant is
a dedicated one with its own streaming job process (``streamjob.Job``), so no other test's batch sits between its
events and the rules. The delay from publishing a classification to a query seeing the mask is printed
(docs/benchmarks.md has the figures).
"""

from __future__ import annotations

import secrets
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from metalake.events import new_event
from metalake.kafka import EventProducer, ensure_topics
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.manager import StackManager
from tenants.access.sync import AccessSync
from tenants.lake_catalog import register_tenant
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, TRINO_POOLED_SCHEMA, TenantNames, names_for, trino_user
from tenants.registry import TenantRegistry
from tests._support.accessit import EMAILS, PII_COLUMNS, connect_as, drop_schema, make_data_table, query_as
from tests._support.itest import trino_rows, wait_for
from tests._support.lakeit import publish, upsert
from tests._support.pipeline_procs import access_runner
from tests._support.streamjob import Job
from tests._support.trinoschema import schema_of

pytestmark = pytest.mark.integration

SOURCE = "/tests/access"


def _tag(tenant: str, urn: str, version: int, *, removed: bool = False) -> Any:
    event_type = "io.metalake.classification.removed.v1" if removed else "io.metalake.classification.added.v1"
    data: dict[str, Any] = {"urn": urn, "version": version, "tag": "PII", "actor": "dpo@example.org"}
    if not removed:
        data.update(source="human", confidence=1.0)
    return new_event(event_type, tenant, data, source=SOURCE)


def test_pii_columns_masked_per_tenant_identity_and_regenerated_on_tag_changes(
    settings: Settings,
    stack: StackManager,
    tenant: str,
    trino_cursor: Any,
    mongo: MongoClient[dict[str, Any]],
    tmp_path: Path,
) -> None:
    other = f"it-{secrets.token_hex(4)}"
    names = names_for(tenant, settings.lake_root, dedicated=True)
    other_names = names_for(other, settings.lake_root)
    ensure_topics(settings, [names.priority_topic, names.bulk_topic])
    job = Job(tenant, tmp_path / "job.log")
    make_data_table(settings, trino_cursor, names, "people")
    make_data_table(settings, trino_cursor, other_names, "people")
    own = f'SELECT email, phone, name, street, iban FROM lake."{schema_of(names)}".people ORDER BY id'
    try:
        job.wait_ready(timeout_s=600)
        with access_runner(settings, "metalake-access-it") as runner_alive:
            check_masks(settings, mongo, names, other_names, own, runner_alive)
    finally:
        job.stop()


def check_masks(
    settings: Settings,
    mongo: MongoClient[dict[str, Any]],
    names: TenantNames,
    other_names: TenantNames,
    own: str,
    runner_alive: Callable[[], None],
) -> None:
    tenant, other = names.tenant_id, other_names.tenant_id
    plain, pii, stranger = trino_user(tenant), trino_user(tenant, pii=True), trino_user(other)

    # The runner's resync (at start, or the schema listing of the next render) gives both tenants their users.
    wait_for("the tenant's user to read its table", lambda: isinstance(query_as(settings, plain, own), list), 60)
    assert query_as(settings, plain, own) == [
        [EMAILS[0], "phone-1", "name-1", "street-1", "iban-1"],
        [EMAILS[1], "phone-2", "name-2", "street-2", "iban-2"],
    ]
    # Another tenant's users see neither the schema nor the table; the service user sees both.
    assert query_as(settings, stranger, own) == "PERMISSION_DENIED"
    assert query_as(settings, plain, f'SELECT * FROM lake."{schema_of(other_names)}".people') == "PERMISSION_DENIED"
    schemas = query_as(settings, plain, "SELECT schema_name FROM lake.information_schema.schemata")
    assert isinstance(schemas, list) and schema_of(names) in {r[0] for r in schemas}
    assert schema_of(other_names) not in {r[0] for r in schemas}
    assert query_as(settings, plain, "SELECT count(*) FROM system.runtime.queries") == "PERMISSION_DENIED"
    assert query_as(settings, plain, f'INSERT INTO lake."{schema_of(names)}".people (id) VALUES (3)') == (
        "PERMISSION_DENIED"
    )

    table_urn = f"urn:metalake:trino:{settings.access.trino_instance}/lake/{schema_of(names)}/people"
    classifications = mongo[names.mongo_database]["classifications"]
    delays, after_mongo = [], []
    with EventProducer(settings) as producer:
        for i, column in enumerate(PII_COLUMNS):
            published = time.monotonic()
            producer.publish([_tag(tenant, f"{table_urn}/{column}", 10 + i)], lambda e: names.priority_topic)
            doc_id = f"{table_urn}/{column}|PII"
            wait_for(f"{column}'s tag in MongoDB", lambda d=doc_id: classifications.find_one({"_id": d}), 300, 0.1)
            in_mongo = time.monotonic()

            def masked(col: str = column) -> bool:
                runner_alive()
                rows = query_as(settings, plain, f'SELECT "{col}" FROM lake."{schema_of(names)}".people')
                return bool(rows == [["****"], ["****"]])

            wait_for(f"{column} masked for the plain user", masked, timeout_s=120, interval_s=0.1)
            delays.append(time.monotonic() - published)
            after_mongo.append(time.monotonic() - in_mongo)

        assert query_as(settings, plain, own) == [["****"] * 5, ["****"] * 5]
        # The PII user reads the same columns in clear; the other tenant's identical table is untouched.
        assert query_as(settings, pii, own) == [
            [EMAILS[0], "phone-1", "name-1", "street-1", "iban-1"],
            [EMAILS[1], "phone-2", "name-2", "street-2", "iban-2"],
        ]
        other_rows = query_as(
            settings, stranger, f'SELECT email FROM lake."{schema_of(other_names)}".people ORDER BY id'
        )
        assert other_rows == [[EMAILS[0]], [EMAILS[1]]]

        # The catalog's own metadata stays readable: the tag assignments themselves are not masked. (The masks follow
        # MongoDB, which leads the lake query's Delta tables: wait for the tags there.)
        def tagged() -> bool:
            rows = query_as(settings, plain, f'SELECT urn FROM lake."{schema_of(names)}".classifications')
            return isinstance(rows, list) and {f"{table_urn}/email"} <= {r[0] for r in rows}

        wait_for("the tags readable in the tenant's classifications table", tagged, timeout_s=180)

        # Removing the tag regenerates the rules the other way.
        producer.publish([_tag(tenant, f"{table_urn}/email", 100, removed=True)], lambda e: names.priority_topic)
        wait_for(
            "email in clear again after the tag was removed",
            lambda: (
                query_as(settings, plain, f'SELECT email FROM lake."{schema_of(names)}".people ORDER BY id')
                == [[EMAILS[0]], [EMAILS[1]]]
            ),
            timeout_s=300,
            interval_s=0.1,
        )

        # A propagated tag (from an upstream column, as propagation writes it) masks like a direct one.
        upstream = "urn:metalake:postgres:prod/crm/public/customers/email"
        propagated = new_event(
            "io.metalake.classification.propagated.v1",
            tenant,
            {
                "urn": f"{table_urn}/email",
                "version": 200,
                "tag": "PII",
                "origin": upstream,
                "path": [upstream, f"{table_urn}/email"],
                "depth": 1,
            },
            source=SOURCE,
        )
        producer.publish([propagated], lambda e: names.priority_topic)
        wait_for(
            "email masked by the propagated tag",
            lambda: (
                query_as(settings, plain, f'SELECT email FROM lake."{schema_of(names)}".people ORDER BY id')
                == [["****"], ["****"]]
            ),
            timeout_s=300,
            interval_s=0.1,
        )
    print(
        f"\n[access] tag event -> masked in Trino: median {statistics.median(delays):.2f}s, "
        f"min {min(delays):.2f}s, max {max(delays):.2f}s over {len(delays)} columns; "
        f"of which after the tag was in MongoDB: median {statistics.median(after_mongo):.2f}s, "
        f"min {min(after_mongo):.2f}s, max {max(after_mongo):.2f}s",
        file=sys.__stderr__,
    )


def test_tags_on_a_mirrored_source_schema_mask_the_tenants_copy(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    """A tenant that mirrors postgres prod/crm/public in its schema (registry settings ``trino_sources``): a PII tag
    on the source column masks the copy. The tag document is upserted as the projection writes it; the event path
    through the job is the test above."""
    names = names_for(tenant, settings.lake_root)
    make_data_table(settings, trino_cursor, names, "customers")
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    source = {"platform": "postgres", "instance": "prod", "database": "crm", "schema": "public"}
    registry.create(tenant, Tier.POOLED, settings={"trino_sources": [source]})
    try:
        urn = "urn:metalake:postgres:prod/crm/public/customers/phone"
        mongo[names.mongo_database]["classifications"].update_one(
            {"_id": f"{urn}|GDPR.contact"},
            {"$set": {"urn": urn, "tag": "GDPR.contact", "source": "human", "deleted": False, "version": 1}},
            upsert=True,
        )
        assert AccessSync(settings, mongo).sync([tenant]) == [tenant]
        sql = f'SELECT email, phone FROM lake."{schema_of(names)}".customers ORDER BY id'
        wait_for(
            "phone masked in the mirror",
            lambda: query_as(settings, trino_user(tenant), sql) == [[EMAILS[0], "****"], [EMAILS[1], "****"]],
            timeout_s=30,
        )
        assert query_as(settings, trino_user(tenant, pii=True), sql) == [[EMAILS[0], "phone-1"], [EMAILS[1], "phone-2"]]
    finally:
        registry.delete(tenant)


# The metadata tables Trino's Delta connector exposes next to a table; the shared tables' must stay unreachable.
METADATA_SUFFIXES = ("", "$history", "$files", "$partitions", "$properties")


def test_a_pooled_tenants_users_read_its_views_and_never_the_shared_tables(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    """Two pooled tenants whose rows share the ``_pooled`` tables: each one's users read their rows through the
    views of their schema, masked on a tagged view column for the plain user; nothing of ``_pooled`` (tables,
    metadata tables, listing) nor of the other tenant is reachable. The events go through the pooled streaming job."""
    other = f"it-{secrets.token_hex(4)}"
    names, other_names = names_for(tenant, settings.lake_root), names_for(other, settings.lake_root)
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    mine = asset_urn("postgres", "it", "shop", "public", f"{tenant}-customers")
    theirs = asset_urn("postgres", "it", "shop", "public", f"{other}-customers")
    try:
        for n in (names, other_names):
            registry.create(n.tenant_id, Tier.POOLED)
            register_tenant(settings, n)
        publish(
            settings, [upsert(tenant, mine, kind="table", name="Ada"), upsert(other, theirs, kind="table", name="Bob")]
        )
        for n, urn in ((names, mine), (other_names, theirs)):

            def through_view(n: TenantNames = n, urn: str = urn) -> bool:
                return trino_rows(trino_cursor, f'SELECT urn FROM lake."{schema_of(n)}".assets') == [(urn,)]

            wait_for(f"{n.tenant_id}'s asset through its view", through_view, timeout_s=300, interval_s=1)
        column = f"urn:metalake:trino:{settings.access.trino_instance}/lake/{schema_of(names)}/assets/name"
        mongo[names.mongo_database]["classifications"].update_one(
            {"_id": f"{column}|PII"},
            {"$set": {"urn": column, "tag": "PII", "source": "human", "deleted": False, "version": 1}},
            upsert=True,
        )
        assert AccessSync(settings, mongo).sync([tenant, other]) == sorted([tenant, other])
        check_pooled_isolation(settings, names, other_names, mine)
    finally:
        for n in (names, other_names):
            drop_schema(settings, trino_cursor, n)
            registry.delete(n.tenant_id)
            mongo.drop_database(n.mongo_database)
            mongo[CONTROL_DATABASE]["trino_access"].delete_one({"_id": n.tenant_id})
        AccessSync(settings, mongo).render()


def check_pooled_isolation(settings: Settings, names: TenantNames, other_names: TenantNames, mine: str) -> None:
    plain, pii = trino_user(names.tenant_id), trino_user(names.tenant_id, pii=True)
    own = f'SELECT urn, name FROM lake."{schema_of(names)}".assets'
    # The access sync read the view's column types (information_schema): a varchar gets the text mask, not NULL.
    wait_for("name masked on the view", lambda: query_as(settings, plain, own) == [[mine, "****"]], timeout_s=30)
    assert query_as(settings, pii, own) == [[mine, "Ada"]]
    shared = [
        f'SELECT count(*) FROM lake."{TRINO_POOLED_SCHEMA}"."{table}{suffix}"'
        for table in ("assets", "events", "classifications")
        for suffix in METADATA_SUFFIXES
    ]
    # The service user keeps the shared tables and their metadata tables (Trino 476 has no ``$files``: not found).
    existing = [sql for sql in shared if isinstance(query_as(settings, settings.trino.user, sql), list)]
    assert len(existing) == 12, existing
    for user in (plain, pii):
        for sql in shared:
            assert query_as(settings, user, sql) == ("PERMISSION_DENIED" if sql in existing else "TABLE_NOT_FOUND")
        assert query_as(settings, user, f'SELECT * FROM lake."{schema_of(other_names)}".assets') == (
            "PERMISSION_DENIED"
        )
        schemas = query_as(settings, user, "SHOW SCHEMAS FROM lake")
        assert isinstance(schemas, list)
        listed = {r[0] for r in schemas}
        assert schema_of(names) in listed and not {TRINO_POOLED_SCHEMA, schema_of(other_names)} & listed
        tables = f"SELECT table_name FROM lake.information_schema.tables WHERE table_schema = '{TRINO_POOLED_SCHEMA}'"
        assert query_as(settings, user, tables) == []
        # A view has no metadata tables of its own that could lead to the shared table's.
        assert not isinstance(
            query_as(settings, user, f'SELECT * FROM lake."{schema_of(names)}"."assets$history"'), list
        )


# Every metadata table Trino 476's Delta connector serves (probed: ``$files``, ``$snapshots``, ``$data`` do not exist).
DELTA_METADATA = ("$history", "$transactions", "$partitions", "$properties")


def test_metadata_tables_of_a_masked_table_are_denied_to_the_tenants_users(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    """Masks sit on the table's columns only: ``people$transactions`` showed every file's min/max statistics, the
    masked email in clear, and ``$history``/``$properties`` the table's writes and settings. Tenant users (plain and
    PII) are denied every metadata table; the service user still reads them."""
    names = names_for(tenant, settings.lake_root)
    make_data_table(settings, trino_cursor, names, "people")
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    try:
        urn = f"urn:metalake:trino:{settings.access.trino_instance}/lake/{schema_of(names)}/people/email"
        mongo[names.mongo_database]["classifications"].update_one(
            {"_id": f"{urn}|PII"},
            {"$set": {"urn": urn, "tag": "PII", "source": "human", "deleted": False, "version": 1}},
            upsert=True,
        )
        assert AccessSync(settings, mongo).sync([tenant]) == [tenant]
        plain, pii = trino_user(tenant), trino_user(tenant, pii=True)
        own = f'SELECT email FROM lake."{schema_of(names)}".people ORDER BY id'
        wait_for("email masked", lambda: query_as(settings, plain, own) == [["****"], ["****"]], timeout_s=30)
        assert query_as(settings, pii, own) == [[EMAILS[0]], [EMAILS[1]]]
        stats = f'SELECT * FROM lake."{schema_of(names)}"."people$transactions"'
        # The leak this closes: the service user sees the masked values in the file statistics.
        assert EMAILS[0] in str(query_as(settings, settings.trino.user, stats))
        for suffix in DELTA_METADATA:
            sql = f'SELECT * FROM lake."{schema_of(names)}"."people{suffix}"'
            assert isinstance(query_as(settings, settings.trino.user, sql), list), suffix
            for user in (plain, pii):
                assert query_as(settings, user, sql) == "PERMISSION_DENIED", (user, suffix)
        # Still listed and readable as a table: only the metadata tables are closed.
        assert query_as(settings, plain, f'SHOW TABLES FROM lake."{schema_of(names)}"') == [["people"]]
    finally:
        drop_schema(settings, trino_cursor, names)
        registry.delete(tenant)
        mongo.drop_database(names.mongo_database)
        mongo[CONTROL_DATABASE]["trino_access"].delete_one({"_id": tenant})
        AccessSync(settings, mongo).render()


def test_a_tenants_queries_run_in_its_own_resource_group(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    """Both of a tenant's users run in ``tenants.<id>`` (ops/stack/resource_groups.py: hard concurrency and queue
    limits per tenant), the service users in ``platform``. Needs Trino started with the stack's resource groups."""
    names = names_for(tenant, settings.lake_root)
    make_data_table(settings, trino_cursor, names, "people")
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    try:
        AccessSync(settings, mongo).sync([tenant])
        plain = trino_user(tenant)
        own = f'SELECT count(*) FROM lake."{schema_of(names)}".people'
        wait_for("the tenant's user to read its table", lambda: query_as(settings, plain, own) == [[2]], 30)
        for user, group in (
            (plain, ["tenants", tenant]),
            (trino_user(tenant, pii=True), ["tenants", tenant]),
            (settings.trino.user, ["platform"]),
        ):
            conn = connect_as(settings, user)
            try:
                cursor = conn.cursor()
                cursor.execute(own)
                assert cursor.fetchall() == [[2]]
                query_id = cursor.query_id
            finally:
                conn.close()
            trino_cursor.execute("SELECT resource_group_id FROM system.runtime.queries WHERE query_id = ?", [query_id])
            assert trino_cursor.fetchall() == [[group]], user
    finally:
        drop_schema(settings, trino_cursor, names)
        registry.delete(tenant)
        mongo.drop_database(names.mongo_database)
        mongo[CONTROL_DATABASE]["trino_access"].delete_one({"_id": tenant})
        AccessSync(settings, mongo).render()


def test_a_tenants_users_cannot_lift_their_query_limits(
    settings: Settings, stack: StackManager, tenant: str, trino_cursor: Any, mongo: MongoClient[dict[str, Any]]
) -> None:
    """A tenant's tool connects to Trino directly: it may shorten its run time (the SQL endpoint does) but not raise
    the execution time, the memory limits or overcommit; every query runs under ``query.max-execution-time``."""
    names = names_for(tenant, settings.lake_root)
    make_data_table(settings, trino_cursor, names, "people")
    registry = TenantRegistry(mongo[CONTROL_DATABASE])
    registry.create(tenant, Tier.POOLED)
    try:
        AccessSync(settings, mongo).sync([tenant])
        plain = trino_user(tenant)
        own = f'SELECT count(*) FROM lake."{schema_of(names)}".people'
        wait_for("the tenant's user to read its table", lambda: query_as(settings, plain, own) == [[2]], 30)
        for user in (plain, trino_user(tenant, pii=True, admin=True)):
            for sql in (
                "SET SESSION query_max_execution_time = '100d'",
                "SET SESSION query_max_memory = '100GB'",
                "SET SESSION resource_overcommit = true",
            ):
                assert query_as(settings, user, sql) == "PERMISSION_DENIED", (user, sql)
            assert isinstance(query_as(settings, user, "SET SESSION query_max_run_time = '10s'"), list), user
        # The cap is Trino's config, not its 100-day default, for the tenant as for everyone.
        shown = query_as(settings, plain, "SHOW SESSION LIKE 'query_max_execution_time'")
        assert isinstance(shown, list) and len(shown) == 1
        assert shown[0][1] == shown[0][2] and shown[0][1] != "100.00d", shown
        # The service users keep every property.
        assert isinstance(query_as(settings, settings.trino.user, "SET SESSION resource_overcommit = true"), list)
    finally:
        drop_schema(settings, trino_cursor, names)
        registry.delete(tenant)
        mongo.drop_database(names.mongo_database)
        mongo[CONTROL_DATABASE]["trino_access"].delete_one({"_id": tenant})
        AccessSync(settings, mongo).render()
