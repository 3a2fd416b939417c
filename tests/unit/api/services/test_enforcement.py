"""The PII decisions for customers' engines (api/services/enforcement.py): masks per user from direct and propagated
tags, the consent row filter, the caches, the engine keys."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from api.routes.engines import RedactEngineKeys
from api.services.enforcement import (
    CatalogSource,
    ColumnRef,
    Engine,
    EngineCache,
    EngineStore,
    TableTags,
    TagCache,
    column_masks,
    load_table_tags,
    parse_engine_key,
    row_filters,
)
from api.services.trino_files import access_control_properties
from tests._support.mongo_list import FakeDatabase

PATTERNS = ["PII", "PII.*", "GDPR.*"]
SOURCE = CatalogSource("warehouse", "postgres", "shop-prod", "shop")


def _engine(**kw: Any) -> Engine:
    values: dict[str, Any] = {
        "tenant": "acme",
        "engine_id": "0123456789abcdef",
        "name": "t",
        "created_at": datetime(2026, 1, 1, tzinfo=UTC),
        "catalogs": (SOURCE,),
        "pii_users": frozenset({"dpo"}),
        "pii_groups": frozenset({"privacy"}),
        "consent_tag": "consent",
        **kw,
    }
    return Engine(**values)


def _col(column: str, type_: str | None = "varchar", catalog: str = "warehouse") -> ColumnRef:
    return ColumnRef(catalog, "public", "people", column, type_)


TAGS = TableTags(
    frozenset(), {"email": frozenset({"PII"}), "ssn": frozenset({"GDPR.id"}), "consent": frozenset({"consent"})}
)


def _masks(engine: Engine, columns: list[ColumnRef], user: str = "analyst", groups: tuple[str, ...] = ()) -> Any:
    seen: list[tuple[str, str, str]] = []

    def tags_of(source: CatalogSource, schema: str, table: str) -> TableTags:
        seen.append((source.catalog, schema, table))
        return TAGS

    return column_masks(engine, columns, tags_of, user=user, groups=groups, patterns=PATTERNS), seen


def test_pii_columns_are_masked_by_type_for_a_user_without_the_grant() -> None:
    columns = [_col("id", "integer"), _col("email", "varchar(255)"), _col("ssn", "bigint"), _col("consent", "boolean")]
    masks, _ = _masks(_engine(), columns)
    # A bounded varchar gets the mask cast to its own type (Trino refuses a mask it cannot coerce to the column's).
    assert masks == [(1, "CAST('****' AS varchar(255))"), (2, "NULL")]
    hashed, _ = _masks(_engine(mask_style="hash"), [_col("email")])
    assert hashed == [(0, 'to_hex(sha256(to_utf8("email")))')]
    short, _ = _masks(_engine(mask_style="hash"), [_col("email", "varchar(2)")])
    assert short == [(0, 'CAST(to_hex(sha256(to_utf8("email"))) AS varchar(2))')]
    nulls, _ = _masks(_engine(mask_style="null"), [_col("email", "varchar(9)")])
    assert nulls == [(0, "NULL")]


def test_pii_users_and_groups_read_in_clear() -> None:
    assert _masks(_engine(), [_col("email")], user="dpo")[0] == []
    assert _masks(_engine(), [_col("email")], groups=("staff", "privacy"))[0] == []
    assert _masks(_engine(), [_col("email")], groups=("staff",))[0] == [(0, "'****'")]


def test_catalogs_the_engine_does_not_map_are_never_masked_nor_read() -> None:
    masks, seen = _masks(_engine(), [_col("email", catalog="other")])
    assert masks == [] and seen == []


def test_a_pii_tag_on_the_table_masks_every_column() -> None:
    def tags_of(source: CatalogSource, schema: str, table: str) -> TableTags:
        return TableTags(frozenset({"PII.customer"}), {})

    masks = column_masks(
        _engine(), [_col("id", "integer"), _col("name")], tags_of, user="a", groups=(), patterns=PATTERNS
    )
    assert masks == [(0, "NULL"), (1, "'****'")]


def test_the_consent_row_filter() -> None:
    engine = _engine()
    assert row_filters(engine, "warehouse", TAGS, user="analyst", groups=()) == [
        'coalesce(try_cast("consent" AS boolean), false)'
    ]
    assert row_filters(engine, "warehouse", TAGS, user="dpo", groups=()) == []
    assert row_filters(engine, "other", TAGS, user="analyst", groups=()) == []
    assert row_filters(_engine(consent_tag=None), "warehouse", TAGS, user="analyst", groups=()) == []
    assert row_filters(engine, "warehouse", TableTags(), user="analyst", groups=()) == []


def _tag_doc(urn: str, tag: str, *, deleted: bool = False, **extra: Any) -> dict[str, Any]:
    return {"_id": f"{urn}|{tag}", "urn": urn, "tag": tag, "deleted": deleted, **extra}


def test_load_table_tags_reads_direct_and_propagated_live_tags_of_the_table_only() -> None:
    db: Any = FakeDatabase()
    table = SOURCE.table_urn("public", "People")
    other = SOURCE.table_urn("public", "people_archive")
    db["classifications"].insert_many(
        [
            _tag_doc(f"{table}/Email", "PII"),
            _tag_doc(f"{table}/phone", "PII", deleted=True),
            _tag_doc(table, "GDPR.table"),
            _tag_doc(f"{other}/email", "PII"),
        ]
    )
    view = SOURCE.table_urn("public", "people")
    db["propagated_tags"].insert_one({**_tag_doc(f"{table}/consent", "consent"), "origin": f"{view}/consent"})
    tags = load_table_tags(db, SOURCE.table_urn("public", "people"))
    assert tags.table == frozenset({"GDPR.table"})
    assert dict(tags.columns) == {"email": frozenset({"PII"}), "consent": frozenset({"consent"})}


def test_tag_cache_serves_within_the_ttl_and_reloads_after() -> None:
    now = [0.0]
    loads: list[int] = []
    cache = TagCache(1.0, 2, clock=lambda: now[0])

    def load() -> TableTags:
        loads.append(1)
        return TableTags(frozenset({str(len(loads))}))

    assert cache.get("acme", "u1", load).table == {"1"}
    now[0] = 0.9
    assert cache.get("acme", "u1", load).table == {"1"}
    now[0] = 1.1
    assert cache.get("acme", "u1", load).table == {"2"}
    # Per tenant: another tenant's entry for the same URN is its own.
    assert cache.get("other", "u1", load).table == {"3"}
    assert cache.get("acme", "u2", load).table == {"4"}  # at max_entries: the cache starts over
    assert cache.get("acme", "u2", load).table == {"4"}
    assert cache.get("acme", "u1", load).table == {"5"}


def test_engine_store_keys_are_hashed_checked_in_constant_time_and_removable() -> None:
    db: Any = FakeDatabase()
    store = EngineStore(db)
    engine, key = store.create("acme", name="t", catalogs=[SOURCE], pii_users=["dpo", "dpo"], consent_tag="consent")
    secret = key.get_secret_value()
    assert secret.startswith(f"mle_{engine.engine_id}_")
    stored = db["engines"].find_one({})
    assert stored is not None and secret.split("_", 2)[2] not in str(stored)
    found = store.check_key(secret)
    assert found is not None and found.tenant == "acme" and found.pii_users == {"dpo"}
    assert found.catalogs == (SOURCE,)
    assert store.check_key(secret[:-1]) is None
    assert store.check_key("mle_0123456789abcdef_x") is None
    assert store.check_key("nonsense") is None
    assert not store.delete("other", engine.engine_id)  # another tenant cannot remove it
    assert store.delete("acme", engine.engine_id)
    assert store.check_key(secret) is None
    with pytest.raises(ValueError):
        store.create("Not A Tenant", name="t", catalogs=[SOURCE])


def test_engine_cache_keeps_answers_for_the_ttl_by_digest() -> None:
    now = [0.0]
    cache = EngineCache(1.0, 10, clock=lambda: now[0])
    answers = [_engine(), None]
    assert cache.get("mle_k", lambda k: answers[0]) is not None
    assert cache.get("mle_k", lambda k: answers[1]) is not None  # cached
    assert "mle_k" not in str(cache._valid._entries)
    now[0] = 2.0
    assert cache.get("mle_k", lambda k: answers[1]) is None


def test_made_up_keys_never_evict_a_real_engines_key() -> None:
    checks: list[str] = []
    real = _engine()

    def check(key: str) -> Engine | None:
        checks.append(key)
        return real if key == "mle_real" else None

    cache = EngineCache(60.0, 2)
    assert cache.get("mle_real", check) is real and cache.known("mle_real")
    for i in range(50):  # a flood of junk keys, far past max_entries
        assert cache.get(f"mle_junk{i}", check) is None
    checks.clear()
    assert cache.get("mle_real", check) is real and checks == []  # still cached: no store lookup
    assert not cache.known("mle_junk49")
    assert cache.get("mle_junk49", check) is None and checks == []  # refused keys are cached too (bounded)


def test_column_masks_look_tags_up_once_per_table() -> None:
    columns = [_col("id", "integer"), _col("email"), _col("ssn", "bigint"), _col("name")]
    masks, seen = _masks(_engine(), columns)
    assert masks == [(1, "'****'"), (2, "NULL")]
    assert seen == [("warehouse", "public", "people")]


def test_parse_engine_key() -> None:
    assert parse_engine_key("mle_0123456789abcdef_s3cr_et") == ("0123456789abcdef", "s3cr_et")
    assert parse_engine_key("mlk_0123456789abcdef_s") is None
    assert parse_engine_key("mle_xyz_s") is None
    assert parse_engine_key("mle_0123456789abcdef_") is None


def test_access_control_properties_name_every_policy_uri() -> None:
    text = access_control_properties("https://metalake.example/", "mle_0123456789abcdef_s")
    assert text.splitlines() == [
        "access-control.name=opa",
        "opa.policy.uri=https://metalake.example/v1/opa/mle_0123456789abcdef_s/allow",
        "opa.policy.batched-uri=https://metalake.example/v1/opa/mle_0123456789abcdef_s/batch",
        "opa.policy.row-filters-uri=https://metalake.example/v1/opa/mle_0123456789abcdef_s/row-filters",
        "opa.policy.batch-column-masking-uri=https://metalake.example/v1/opa/mle_0123456789abcdef_s/column-masks",
    ]


def test_access_log_lines_never_carry_an_engine_key() -> None:
    import logging

    record = logging.LogRecord(
        "uvicorn.access",
        logging.INFO,
        __file__,
        1,
        '%s - "%s %s HTTP/%s" %d',
        ("127.0.0.1:5", "POST", "/v1/opa/mle_0123456789abcdef_TOPSECRET/allow", "1.1", 200),
        None,
    )
    assert RedactEngineKeys().filter(record)
    assert "TOPSECRET" not in record.getMessage()
    assert "/v1/opa/mle_0123456789abcdef_***/allow" in record.getMessage()


def test_a_failed_decision_answers_503_without_the_key(caplog: pytest.LogCaptureFixture) -> None:
    import asyncio

    from api.routes.engines import _guarded

    async def decision(request: Any, key: str) -> Any:
        raise RuntimeError(f"mongo down while serving {key}")

    key = "mle_0123456789abcdef_TOPSECRET"
    with caplog.at_level("ERROR"):
        response = asyncio.run(_guarded(decision)(None, key))  # type: ignore[arg-type]
    assert response.status_code == 503
    assert b"TOPSECRET" not in response.body and b"instance" not in response.body
    assert "TOPSECRET" not in caplog.text and "RuntimeError" in str([r.__dict__ for r in caplog.records])


def test_the_consent_filter_names_only_columns_the_table_has() -> None:
    # issue 21, item 3: a consent tag on a column Trino does not list (dropped, or a URN no column matches) must not
    # make the filter reference it (Trino would fail every query on the table).
    tags = TableTags(frozenset(), {"consent": frozenset({"consent"}), "ghost": frozenset({"consent"})})
    engine = _engine()
    both = row_filters(engine, "warehouse", tags, user="analyst", groups=())
    assert both == ['coalesce(try_cast("consent" AS boolean), false)', 'coalesce(try_cast("ghost" AS boolean), false)']
    present = frozenset({"id", "consent"})
    assert row_filters(engine, "warehouse", tags, user="analyst", groups=(), present=present) == [
        'coalesce(try_cast("consent" AS boolean), false)'
    ]
    # Only a missing column says who consented: no row is shown (the filter fails closed, the query still runs).
    ghost_only = TableTags(frozenset(), {"ghost": frozenset({"consent"})})
    assert row_filters(engine, "warehouse", ghost_only, user="analyst", groups=(), present=present) == ["false"]
    assert row_filters(engine, "warehouse", TableTags(), user="analyst", groups=(), present=present) == []
