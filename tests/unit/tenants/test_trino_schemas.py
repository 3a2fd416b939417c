"""Tenants' Trino schema names are keyed (issue 21 item 21): a tenant's JWT in a Trino client cannot test guessed tenant
ids, because the name needs the deployment's key; the processes that have the key all name and recognise them alike."""

from __future__ import annotations

import re
from typing import Any

import pytest
import trino

from ops.settings import Settings
from tenants import schema_migration
from tenants.access.columns import masked_columns
from tenants.access.rules import TenantAccess, TrinoColumn, build_rules
from tenants.naming import TRINO_POOLED_SCHEMA, trino_user
from tenants.schema_migration import SchemaMove, plan
from tenants.trino_schemas import SUFFIX_LENGTH, UNKEYED, SchemaNamer, schema_namer, trino_schema

KEK = "a-key-encryption-key-of-32-bytes"
OTHER_KEK = "another-key-encryption-key-32by!"
IDS = ("acme", "acme-corp-eu", "a1-b2-c3", "x" * 40, "acme-abcdefghijkl")


def _settings(**secrets: Any) -> Settings:
    return Settings.model_validate({"api": {"key_encryption_key": KEK}, "secrets": secrets})


def test_a_schema_name_is_not_the_tenant_id() -> None:
    namer = schema_namer(_settings())
    assert namer.keyed
    for tenant in IDS:
        schema = namer.schema(tenant)
        plain = tenant.replace("-", "_")
        prefix, suffix = schema[: len(plain)], schema[len(plain) + 1 :]
        assert schema != plain and prefix == plain and schema[len(plain)] == "_"
        assert re.fullmatch(r"[a-z2-7]+", suffix) and len(suffix) == SUFFIX_LENGTH
        assert re.fullmatch(r"[a-z][a-z0-9_]*", schema)  # Trino keeps it as written, no quoting surprises


def test_another_key_names_other_schemas_and_the_same_key_the_same() -> None:
    one, again = schema_namer(_settings()), schema_namer(_settings())
    other = schema_namer(_settings(schema_key=OTHER_KEK))
    for tenant in IDS:
        assert one.schema(tenant) == again.schema(tenant) == trino_schema(_settings(), tenant)
        assert one.schema(tenant) != other.schema(tenant)
        assert other.tenant(one.schema(tenant)) is None


def test_the_schema_key_wins_and_keeps_names_across_a_kek_rotation() -> None:
    before = schema_namer(_settings())
    rotated = _settings(key_encryption_key=OTHER_KEK, previous_key_encryption_keys=[KEK])
    assert schema_namer(rotated).schema("acme") != before.schema("acme")  # the secrets KEK comes before the API's
    pinned = _settings(key_encryption_key=OTHER_KEK, schema_key=KEK)
    assert schema_namer(pinned).schema("acme") == before.schema("acme")


def test_the_key_never_shows_in_a_namer_s_repr() -> None:
    namer = schema_namer(_settings())
    assert namer.key is not None and namer.key.hex() not in repr(namer) and str(namer.key) not in repr(namer)


def test_no_key_names_schemas_after_the_id_as_before() -> None:
    namer = schema_namer(Settings.model_validate({}))
    assert namer is UNKEYED and not namer.keyed
    assert namer.schema("acme-corp") == "acme_corp" and namer.tenant("acme_corp") == "acme-corp"


def test_a_schema_maps_back_to_its_tenant_and_a_forged_suffix_to_none() -> None:
    namer = schema_namer(_settings())
    for tenant in IDS:
        schema = namer.schema(tenant)
        assert namer.tenant(schema) == tenant
        head, last = schema[:-1], schema[-1]
        assert namer.tenant(head + ("a" if last != "a" else "b")) is None  # one character off
        assert namer.tenant(schema[:-1]) is None and namer.tenant(schema + "a") is None  # shorter, longer
        assert namer.tenant(tenant.replace("-", "_")) is None  # the id alone
    # Another tenant's suffix on this tenant's id: not this tenant's schema.
    globex_suffix = namer.schema("globex").rsplit("_", 1)[1]
    assert namer.tenant(f"acme_{globex_suffix}") is None
    for schema in ("information_schema", "default", TRINO_POOLED_SCHEMA, "x", "has-hyphen", "_" + "a" * SUFFIX_LENGTH):
        assert namer.tenant(schema) is None and UNKEYED.tenant(schema) is None


def test_the_rules_grant_the_keyed_schema_and_nothing_under_the_id() -> None:
    namer = schema_namer(_settings())
    rules = build_rules(["metalake"], [TenantAccess("acme-eu")], catalog="lake", schemas=namer)
    granted = [r for r in rules["tables"] if "user" in r and re.fullmatch(r["user"], trino_user("acme-eu"))]
    schemas = {r["schema"] for r in granted if "schema" in r}
    assert schemas and all(re.fullmatch(s, namer.schema("acme-eu")) for s in schemas)
    assert not any(re.fullmatch(s, "acme_eu") for s in schemas)


@pytest.mark.parametrize("registered", [(), ("acme-abcdefghijkl",)])
def test_the_migration_moves_schemas_named_under_an_earlier_naming(registered: tuple[str, ...]) -> None:
    settings = _settings(key_encryption_key=OTHER_KEK, previous_key_encryption_keys=[KEK])
    current, previous = schema_namer(settings), SchemaNamer(schema_namer(_settings()).key)
    listed = [
        "information_schema",
        TRINO_POOLED_SCHEMA,
        current.schema("ready"),  # already current: stays
        "acme_corp",  # named after the id alone
        previous.schema("globex"),  # under the previous key
        "acme_abcdefghijkl",  # keyed under a key no longer known, or the plain name of a tenant so named
    ]
    moves = plan(settings, listed, registered)
    expected = [
        SchemaMove("acme-corp", "acme_corp", current.schema("acme-corp")),
        SchemaMove("globex", previous.schema("globex"), current.schema("globex")),
    ]
    if registered:
        expected.append(SchemaMove("acme-abcdefghijkl", "acme_abcdefghijkl", current.schema("acme-abcdefghijkl")))
    assert sorted(moves, key=lambda m: m.old) == sorted(expected, key=lambda m: m.old)
    assert plan(settings, [m.new for m in moves]) == []  # idempotent: the moved schemas are current


def test_a_tag_on_the_schema_s_former_name_still_masks_the_moved_column() -> None:
    # Tags name columns by URN, schema included: those written before the move must keep masking after it.
    namer = schema_namer(_settings())
    new = namer.schema("acme-eu")
    docs = [
        {"urn": "urn:metalake:trino:metalake/lake/acme_eu/people/email", "tag": "PII"},  # before the move
        {"urn": f"urn:metalake:trino:metalake/lake/{new}/people/phone", "tag": "PII"},
        {"urn": "urn:metalake:trino:metalake/lake/globex/people/iban", "tag": "PII"},  # not a name of this schema
    ]
    found = masked_columns(docs, schema=new, patterns=["PII"], catalog="lake", instance="metalake", former=["acme_eu"])
    assert found == {TrinoColumn(new, "people", "email"), TrinoColumn(new, "people", "phone")}
    assert masked_columns(docs, schema=new, patterns=["PII"], catalog="lake", instance="metalake") == {
        TrinoColumn(new, "people", "phone")
    }


def test_a_schema_that_fails_to_move_does_not_hold_back_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    settings, moved = _settings(), []

    def move(settings: Settings, names: Any, old: str) -> list[str]:
        if old == "acme_one":
            raise trino.exceptions.TrinoConnectionError("dropped meanwhile")
        moved.append(old)
        return []

    monkeypatch.setattr(schema_migration.catalog, "schemas", lambda s: ["acme_one", "globex_two"])
    monkeypatch.setattr(schema_migration.catalog, "tables", lambda s, schema: {})
    monkeypatch.setattr(schema_migration, "move_schema", move)
    registry: Any = type("Registry", (), {"list": lambda self: []})()
    moves = schema_migration.migrate_schemas(settings, registry)
    assert moved == ["globex_two"]
    assert [(m.tenant, m.error) for m in moves] == [("acme-one", "TrinoConnectionError"), ("globex-two", None)]
