"""The OPA decisions' tag lookups (api/services/tag_lookup.py): exact on the normalised ``urn_keys``, one query per
tag collection for a whole batch of tables (issue 21, item 12), the old regex way until the tenant's backfill."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from api.services.enforcement import CatalogSource, ColumnRef, Engine, TableTags, TagCache
from api.services.resume import Resumer
from api.services.tag_lookup import Lookups, batch_masks, load_tags, tags_for
from catalog import urn_keys
from ops.settings import Settings
from tenants.naming import CONTROL_DATABASE, names_for
from tests._support.mongo_list import FakeDatabase

PATTERNS = ["PII", "PII.*"]
# The engine maps the catalog to the source in lower case, as Trino reports every name.
SOURCE = CatalogSource("warehouse", "postgres", "shop-prod", "shop")
STORED = CatalogSource("warehouse", "postgres", "Shop-Prod", "Shop")  # the source's own spelling


def _tag(db: Any, collection: str, urn: str, tag: str, *, deleted: bool = False, keys: bool = True) -> None:
    doc = {"_id": f"{urn}|{tag}|{len(db[collection].docs)}", "urn": urn, "tag": tag, "deleted": deleted}
    db[collection].insert_one({**doc, "urn_keys": urn_keys.urn_keys(urn)} if keys else doc)


def _catalog(db: Any, tables: int, *, keys: bool = True) -> None:
    """``Public.T<i>`` with ``Email`` tagged PII (direct), ``Phone`` PII (propagated), a removed tag, a table tag."""
    for i in range(tables):
        table = STORED.table_urn("Public", f"T{i}")
        _tag(db, "classifications", f"{table}/Email", "PII", keys=keys)
        _tag(db, "classifications", f"{table}/Name", "PII", deleted=True, keys=keys)
        _tag(db, "classifications", table, "GDPR", keys=keys)
        _tag(db, "propagated_tags", f"{table}/Phone", "PII", keys=keys)
        _tag(db, "classifications", f"{table}x/Email", "PII", keys=keys)  # a table whose name only starts alike


def test_a_batch_of_tables_is_one_exact_query_per_tag_collection() -> None:
    db: Any = FakeDatabase()
    _catalog(db, 20)
    urns = [SOURCE.table_urn("public", f"t{i}") for i in range(20)]
    found = load_tags(db, urns)
    for name in urn_keys.COLLECTIONS:
        assert db[name].queries == [{"urn_keys": {"$in": sorted(urns)}, "deleted": {"$ne": True}}]
    assert all(
        found[u] == TableTags(frozenset({"GDPR"}), {"email": frozenset({"PII"}), "phone": frozenset({"PII"})})
        for u in urns
    )


def test_on_ferretdb_each_table_is_an_equality_it_pushes_down() -> None:
    # FerretDB 1.x filters $in after reading the whole collection; a scalar equality it serves from its GIN index.
    db: Any = FakeDatabase()
    _catalog(db, 3)
    db.build_info["ferretdbVersion"] = "v1.24.2"
    urns = [SOURCE.table_urn("public", f"t{i}") for i in range(3)]
    urn_keys.backfill(db)
    found = tags_for(db, Lookups(), "acme", urns)
    for name in urn_keys.COLLECTIONS:
        assert db[name].queries[-3:] == [{"urn_keys": u, "deleted": {"$ne": True}} for u in sorted(urns)]
    assert found == load_tags(db, urns, batched=True)


def test_one_table_is_an_equality_which_ferretdb_pushes_down() -> None:
    db: Any = FakeDatabase()
    _catalog(db, 2)
    urn = SOURCE.table_urn("public", "t1")
    # Two spellings of one table in one batch: one key, each spelling answered.
    found = load_tags(db, [urn, STORED.table_urn("Public", "T1")])
    assert db["classifications"].queries == [{"urn_keys": urn, "deleted": {"$ne": True}}]
    assert found[urn].columns["email"] == {"PII"} and len(found) == 2


def test_before_the_backfill_tags_are_read_the_old_way_and_none_is_missed() -> None:
    db: Any = FakeDatabase()
    table = STORED.table_urn("Public", "T0")
    db["classifications"].insert_one({"_id": "a", "urn": f"{table}/Email", "tag": "PII"})  # no urn_keys yet
    lookups = Lookups()
    old = tags_for(db, lookups, "acme", [SOURCE.table_urn("public", "t0")])
    assert old[SOURCE.table_urn("public", "t0")].columns == {"email": {"PII"}}
    assert "$regex" in str(db["classifications"].queries)
    urn_keys.backfill(db)
    db["classifications"].queries.clear()
    new = tags_for(db, lookups, "acme", [SOURCE.table_urn("public", "t0")])
    assert new == old and "$regex" not in str(db["classifications"].queries)
    db["migrations"].docs.clear()
    assert lookups.ready("acme", db)  # known ready: the marker is not read again


def test_the_cache_loads_only_the_missing_tables_in_one_call() -> None:
    now = [0.0]
    calls: list[list[str]] = []
    cache = TagCache(1.0, 10, clock=lambda: now[0])

    def load(urns: Any) -> dict[str, TableTags]:
        calls.append(list(urns))
        return {u: TableTags(frozenset({u})) for u in urns}

    cache.get_many("acme", ["a", "b"], load)
    assert cache.get_many("acme", ["b", "c", "c"], load)["c"].table == {"c"}
    assert calls == [["a", "b"], ["c"]]
    now[0] = 2.0
    cache.get_many("acme", ["a", "c"], load)
    assert calls[-1] == ["a", "c"]


def _engine(**kw: Any) -> Engine:
    created = datetime(2026, 1, 1, tzinfo=UTC)
    return Engine("acme", "0123456789abcdef", "t", created, (SOURCE,), pii_users=frozenset({"dpo"}), **kw)


def test_batch_masks_look_every_table_up_in_one_call() -> None:
    db: Any = FakeDatabase()
    _catalog(db, 20)
    columns = [
        ColumnRef("warehouse", "public", f"t{t}", name, "varchar")
        for t in range(20)
        for name in ("id", "email", "name", "phone", *(f"c{k}" for k in range(6)))
    ]
    columns.append(ColumnRef("other", "public", "t0", "email", "varchar"))  # an unmapped catalog: not looked up
    calls: list[list[str]] = []

    def load(urns: list[str]) -> dict[str, TableTags]:
        calls.append(urns)
        return load_tags(db, urns)

    masks = batch_masks(_engine(), columns, load, user="analyst", groups=(), patterns=PATTERNS)
    assert len(calls) == 1 and len(calls[0]) == 20
    # The table's GDPR tag is not PII here: only email and phone are masked, in every table.
    assert [columns[i].column for i, _ in masks] == ["email", "phone"] * 20
    assert batch_masks(_engine(), columns, load, user="dpo", groups=(), patterns=PATTERNS) == []
    assert calls[-1] == []  # a PII user's batch reads no tag


def test_the_api_resumer_backfills_active_and_suspended_tenants_once() -> None:
    class Client(dict[str, FakeDatabase]):
        def __missing__(self, name: str) -> FakeDatabase:
            self[name] = FakeDatabase()
            return self[name]

    settings, mongo = Settings(), Client()
    db: Any = None
    now = datetime.now(UTC)
    for tenant, state in (("acme", "active"), ("paused", "suspended"), ("new", "provisioning")):
        doc = {"_id": tenant, "tier": "pooled", "state": state, "created_at": now, "updated_at": now}
        mongo[CONTROL_DATABASE]["tenants"].insert_one(doc)
        _catalog(mongo[names_for(tenant, settings.lake_root).mongo_database], 1, keys=False)
    ctx: Any = type("Ctx", (), {"mongo": mongo, "settings": settings})()
    resumer = Resumer(ctx)
    resumer.sweep()
    done = {}
    for t in ("acme", "paused", "new"):
        db = mongo[names_for(t, settings.lake_root).mongo_database]
        done[t] = urn_keys.ready(db)
    assert done == {"acme": True, "paused": True, "new": False}  # provisioning records it itself (MongoStep)
    sent = len(mongo["metalake_acme"].commands)
    assert sent == 5  # each of its tag documents once
    resumer.sweep()
    assert len(mongo["metalake_acme"].commands) == sent
