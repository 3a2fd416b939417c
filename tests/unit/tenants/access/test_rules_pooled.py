"""The rules on the pooled layout: a tenant's users read the views in their schema, never the shared tables of
``_pooled`` nor their metadata tables; masks sit on the views' columns; service users keep everything."""

from __future__ import annotations

import re
from typing import Any

import pytest

from tenants.access.rules import TenantAccess, build_rules
from tenants.naming import ADMIN_ONLY_TABLES, POOLED_TABLES, TRINO_POOLED_SCHEMA, trino_user
from tenants.trino_schemas import UNKEYED, SchemaNamer

SERVICES = ["metalake", "metalake-tests"]
METADATA_SUFFIXES = ("", "$history", "$files", "$partitions", "$properties")


def _first_table_rule(rules: dict[str, Any], user: str, schema: str, table: str) -> dict[str, Any] | None:
    """Trino's semantics: the first table rule whose regexes all match (absent fields match anything) decides."""
    for rule in rules["tables"]:
        wanted = (("user", user), ("catalog", "lake"), ("schema", schema), ("table", table))
        if all(re.fullmatch(rule.get(k, ".*"), v) for k, v in wanted):
            return dict(rule)
    return None


def _schema_visible(rules: dict[str, Any], user: str, schema: str) -> bool:
    """Trino lists a schema to a user who owns it or has any privilege on a table rule naming it."""
    for rule in rules["schemas"]:
        if re.fullmatch(rule.get("user", ".*"), user) and re.fullmatch(rule.get("schema", ".*"), schema):
            return bool(rule.get("owner"))
    return any(
        re.fullmatch(rule.get("user", ".*"), user)
        and re.fullmatch(rule.get("catalog", ".*"), "lake")
        and re.fullmatch(rule.get("schema", ".*"), schema)
        and rule.get("privileges")
        for rule in rules["tables"]
    )


@pytest.fixture
def rules() -> dict[str, Any]:
    masked = {"assets": {"name": "varchar", "description": "varchar"}}
    return build_rules(
        SERVICES, [TenantAccess("acme", masked), TenantAccess("globex")], catalog="lake", schemas=UNKEYED
    )


@pytest.mark.parametrize("pii", [False, True])
def test_tenant_users_never_reach_the_shared_tables_or_their_metadata(rules: dict[str, Any], pii: bool) -> None:
    user = trino_user("acme", pii=pii)
    for table in POOLED_TABLES:
        for suffix in METADATA_SUFFIXES:
            # No rule, or the tenant users' deny rule for metadata tables: both deny.
            rule = _first_table_rule(rules, user, TRINO_POOLED_SCHEMA, table + suffix)
            assert rule is None or rule["privileges"] == []
    assert not _schema_visible(rules, user, TRINO_POOLED_SCHEMA)
    assert not _schema_visible(rules, user, "globex")
    assert _schema_visible(rules, user, "acme")


def test_tenant_users_read_their_views_and_not_another_tenants(rules: dict[str, Any]) -> None:
    for table in POOLED_TABLES:
        own = _first_table_rule(rules, trino_user("acme", admin=True), "acme", table)
        assert own is not None and own["privileges"] == ["SELECT"]
        # The dead letters (raw payloads) are the tenant administrators' only.
        own = _first_table_rule(rules, trino_user("acme"), "acme", table)
        assert own is not None and own["privileges"] == ([] if table in ADMIN_ONLY_TABLES else ["SELECT"])
        assert _first_table_rule(rules, trino_user("acme"), "globex", table) is None
        assert _first_table_rule(rules, trino_user("globex", pii=True), "acme", table) is None


def test_masks_sit_on_the_view_columns_for_the_plain_user_only(rules: dict[str, Any]) -> None:
    plain = _first_table_rule(rules, trino_user("acme"), "acme", "assets")
    assert plain is not None
    assert {c["name"]: c["mask"] for c in plain["columns"]} == {"name": "'****'", "description": "'****'"}
    pii = _first_table_rule(rules, trino_user("acme", pii=True), "acme", "assets")
    assert pii is not None and "columns" not in pii


def test_service_users_keep_the_shared_tables(rules: dict[str, Any]) -> None:
    for user in SERVICES:
        for suffix in METADATA_SUFFIXES:
            rule = _first_table_rule(rules, user, TRINO_POOLED_SCHEMA, "assets" + suffix)
            assert rule is not None and "OWNERSHIP" in rule["privileges"]
        assert _schema_visible(rules, user, TRINO_POOLED_SCHEMA)


def test_the_shared_schema_is_no_tenants() -> None:
    # The access sync gives rules to unregistered tenants that have a schema: never to the shared tables' schema.
    assert UNKEYED.tenant(TRINO_POOLED_SCHEMA) is None
    assert SchemaNamer(bytes(32)).tenant(TRINO_POOLED_SCHEMA) is None
