"""The Trino rules generator: service users keep everything, tenants see only their schema, PII columns masked."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from tenants.access.rules import (
    MirroredSchema,
    TenantAccess,
    TrinoColumn,
    build_rules,
    column_for_urn,
    is_masked_tag,
    mask_expression,
    mirrored_schemas,
    write_rules,
)
from tenants.naming import InvalidTenantId, trino_user
from tenants.trino_schemas import UNKEYED

SERVICES = ["metalake", "metalake-tests"]


def _first_table_rule(rules: dict[str, Any], user: str, catalog: str, schema: str, table: str) -> dict[str, Any] | None:
    """Trino's semantics: the first table rule whose regexes all match (absent fields match anything) decides."""
    table_rules: list[dict[str, Any]] = rules["tables"]
    for rule in table_rules:
        if all(
            re.fullmatch(rule.get(k, ".*"), v)
            for k, v in (("user", user), ("catalog", catalog), ("schema", schema), ("table", table))
        ):
            return rule
    return None


def _catalog_access(rules: dict[str, Any], user: str, catalog: str) -> str:
    for rule in rules["catalogs"]:
        if re.fullmatch(rule.get("user", ".*"), user) and re.fullmatch(rule.get("catalog", ".*"), catalog):
            return str(rule["allow"])
    return "none"


@pytest.fixture
def rules() -> dict[str, Any]:
    return build_rules(
        SERVICES,
        [
            TenantAccess("acme", {"people": {"email": "varchar", "born": "date"}}),
            TenantAccess("acme-eu"),
            TenantAccess("globex", {"orders": {"card": "varchar"}}),
        ],
        catalog="lake",
        schemas=UNKEYED,
    )


def test_trino_users_are_distinct_per_tenant_and_role() -> None:
    assert trino_user("acme") == "tenant.acme"
    assert trino_user("acme", pii=True) == "tenant.acme.pii"
    assert trino_user("acme", admin=True) == "tenant.acme.admin"
    assert trino_user("acme", pii=True, admin=True) == "tenant.acme.admin.pii"
    # "acme-pii" is a valid tenant id: its user must not be acme's PII user.
    assert trino_user("acme-pii") != trino_user("acme", pii=True)
    with pytest.raises(InvalidTenantId):
        trino_user("Not_Valid")


def test_service_users_have_full_access_everywhere(rules: dict[str, Any]) -> None:
    for user in SERVICES:
        rule = _first_table_rule(rules, user, "lake", "acme", "people")
        assert rule is not None and "OWNERSHIP" in rule["privileges"] and "columns" not in rule
        assert _catalog_access(rules, user, "system") == "all"
    assert re.fullmatch(rules["procedures"][0]["user"], "metalake")
    assert re.fullmatch(rules["system_information"][0]["user"], "metalake-tests")


def test_a_tenant_reads_only_its_own_schema(rules: dict[str, Any]) -> None:
    for user in (trino_user("acme"), trino_user("acme", pii=True)):
        own = _first_table_rule(rules, user, "lake", "acme", "assets")
        assert own is not None and own["privileges"] == ["SELECT"]
        for schema in ("globex", "acme_eu", "information_schema_x"):
            assert _first_table_rule(rules, user, "lake", schema, "assets") is None
        assert _first_table_rule(rules, user, "system", "runtime", "queries") is None
        assert _catalog_access(rules, user, "lake") == "read-only"
        assert _catalog_access(rules, user, "system") == "none"
    # acme's user is not a prefix match for acme-eu's schema, nor the other way round.
    assert _first_table_rule(rules, trino_user("acme-eu"), "lake", "acme", "people") is None
    assert _first_table_rule(rules, trino_user("acme-eu"), "lake", "acme_eu", "x") is not None


def test_unknown_users_get_nothing(rules: dict[str, Any]) -> None:
    assert _first_table_rule(rules, "mallory", "lake", "acme", "people") is None
    assert _catalog_access(rules, "mallory", "lake") == "none"
    assert _first_table_rule(rules, "tenant.unknown", "lake", "unknown", "t") is None


def test_pii_columns_are_masked_for_the_plain_user_only(rules: dict[str, Any]) -> None:
    plain = _first_table_rule(rules, trino_user("acme"), "lake", "acme", "people")
    assert plain is not None
    assert {c["name"]: c["mask"] for c in plain["columns"]} == {"email": "'****'", "born": "NULL"}
    pii = _first_table_rule(rules, trino_user("acme", pii=True), "lake", "acme", "people")
    assert pii is not None and "columns" not in pii
    # Another table of the same schema: readable, unmasked.
    other = _first_table_rule(rules, trino_user("acme"), "lake", "acme", "assets")
    assert other is not None and "columns" not in other
    # A masked table of one tenant puts no mask on the same-named table of another.
    assert _first_table_rule(rules, trino_user("globex"), "lake", "globex", "people") is not None
    globex = _first_table_rule(rules, trino_user("globex"), "lake", "globex", "orders")
    assert globex is not None and globex["columns"] == [{"name": "card", "mask": "'****'"}]


@pytest.mark.parametrize("suffix", ["$history", "$transactions", "$partitions", "$properties", "$files", "$x"])
def test_tenant_users_never_read_metadata_tables(rules: dict[str, Any], suffix: str) -> None:
    """A masked table's metadata tables would bypass its masks ($transactions holds min/max statistics in clear)."""
    for tenant, table in (("acme", "people"), ("acme", "assets"), ("globex", "orders")):
        for user in (trino_user(tenant), trino_user(tenant, pii=True)):
            rule = _first_table_rule(rules, user, "lake", tenant, table + suffix)
            assert rule is not None and rule["privileges"] == [], (user, table + suffix)
            assert _first_table_rule(rules, user, "lake", tenant, table) != rule
    # The service users keep them.
    rule = _first_table_rule(rules, "metalake", "lake", "acme", "people$transactions")
    assert rule is not None and "SELECT" in rule["privileges"]


@pytest.mark.parametrize("table", ["audit", "_dlq"])
def test_audit_and_dead_letters_are_for_the_tenants_admin_users_only(rules: dict[str, Any], table: str) -> None:
    """The API keeps the audit trail and the dead letters (raw payloads) to tenant:admin: so does Trino."""
    for user in (trino_user("acme"), trino_user("acme", pii=True)):
        rule = _first_table_rule(rules, user, "lake", "acme", table)
        assert rule is not None and rule["privileges"] == [], user
    for pii in (False, True):
        rule = _first_table_rule(rules, trino_user("acme", pii=pii, admin=True), "lake", "acme", table)
        assert rule is not None and rule["privileges"] == ["SELECT"]
        assert _catalog_access(rules, trino_user("acme", pii=pii, admin=True), "lake") == "read-only"
        # An admin of one tenant is nobody in another.
        assert _first_table_rule(rules, trino_user("globex", pii=pii, admin=True), "lake", "acme", table) is None


def test_admin_users_see_masks_as_their_pii_role_says(rules: dict[str, Any]) -> None:
    admin = _first_table_rule(rules, trino_user("acme", admin=True), "lake", "acme", "people")
    assert admin is not None and {c["name"] for c in admin["columns"]} == {"email", "born"}
    admin_pii = _first_table_rule(rules, trino_user("acme", pii=True, admin=True), "lake", "acme", "people")
    assert admin_pii is not None and "columns" not in admin_pii
    for pii in (False, True):
        meta = _first_table_rule(rules, trino_user("acme", pii=pii, admin=True), "lake", "acme", "audit$history")
        assert meta is not None and meta["privileges"] == []


def _may_set(rules: dict[str, Any], user: str, prop: str, catalog: str | None = None) -> bool:
    """Trino's semantics for session properties: the first rule whose regexes match decides; none: denied."""
    section = rules["system_session_properties"] if catalog is None else rules["catalog_session_properties"]
    wanted = (("user", user), ("property", prop)) + ((("catalog", catalog),) if catalog else ())
    for rule in section:
        if all(re.fullmatch(rule.get(k, ".*"), v) for k, v in wanted):
            return bool(rule["allow"])
    return False


def test_tenant_users_cannot_lift_their_query_limits(rules: dict[str, Any]) -> None:
    """Without these rules Trino lets anyone set any session property: a tenant's tool could raise its execution
    time, memory limits or overcommit. Only the SQL endpoint's shorter run time is theirs to set."""
    for user in (trino_user("acme"), trino_user("acme", pii=True, admin=True), trino_user("globex")):
        for prop in ("query_max_execution_time", "query_max_memory", "query_max_total_memory", "resource_overcommit"):
            assert not _may_set(rules, user, prop), (user, prop)
        assert not _may_set(rules, user, "parquet_max_read_block_size", catalog="lake")
        assert _may_set(rules, user, "query_max_run_time")
    assert not _may_set(rules, "mallory", "query_max_run_time")
    for service in SERVICES:
        assert _may_set(rules, service, "query_max_execution_time")
        assert _may_set(rules, service, "anything", catalog="lake")


def test_the_impersonator_may_act_as_every_tenant_user_and_no_other() -> None:
    rules = build_rules(SERVICES, [TenantAccess("acme")], catalog="lake", schemas=UNKEYED, impersonator="metalake")
    allowed = rules["impersonation"][0]
    for pii in (False, True):
        for admin in (False, True):
            assert re.fullmatch(allowed["new_user"], trino_user("acme", pii=pii, admin=admin))
    for other in ("metalake-tests", "tenant.acme.root", "tenant.acme.pii.admin", "tenant.acme.admin.x"):
        assert not re.fullmatch(allowed["new_user"], other)


def test_only_builtin_functions_and_no_procedures_for_tenants(rules: dict[str, Any]) -> None:
    tenant_function_rules = [r for r in rules["functions"] if not re.fullmatch(r.get("user", ".*"), "nobody-else")]
    assert len(tenant_function_rules) == 1  # the service users' rule
    open_rule = next(r for r in rules["functions"] if "user" not in r)
    assert (open_rule["catalog"], open_rule["schema"], open_rule["privileges"]) == ("system", "builtin", ["EXECUTE"])
    assert all("user" in r for r in rules["procedures"])
    # Only the listed (active) tenants' users run queries at all: a suspended tenant's token cannot even SELECT 1.
    [tenant_queries] = [r for r in rules["queries"] if r["allow"] == ["execute"]]
    assert re.fullmatch(tenant_queries["user"], "tenant.acme") and not re.fullmatch(tenant_queries["user"], "nobody")
    assert all("user" in r for r in rules["queries"])


def test_rules_are_deterministic_and_only_use_known_keys() -> None:
    a = build_rules(SERVICES, [TenantAccess("b-tenant"), TenantAccess("a-tenant")], catalog="lake", schemas=UNKEYED)
    b = build_rules(
        list(reversed(SERVICES)), [TenantAccess("a-tenant"), TenantAccess("b-tenant")], catalog="lake", schemas=UNKEYED
    )
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)
    # Trino refuses a rules file with unknown properties: keep to the ones Trino 476 reads.
    assert set(a) <= {
        "catalogs",
        "schemas",
        "tables",
        "functions",
        "procedures",
        "system_information",
        "queries",
        "impersonation",
        "authorization",
        "principals",
        "system_session_properties",
        "catalog_session_properties",
    }


def test_no_tenants_means_service_users_only() -> None:
    rules = build_rules(SERVICES, [], catalog="lake", schemas=UNKEYED)
    assert len(rules["catalogs"]) == 1 and len(rules["tables"]) == 1


@pytest.mark.parametrize(
    ("data_type", "style", "expected"),
    [
        ("varchar", "redact", "'****'"),
        ("varchar(20)", "redact", "'****'"),
        ("integer", "redact", "NULL"),
        (None, "redact", "NULL"),
        ("varchar", "null", "NULL"),
        ("varchar", "hash", 'to_hex(sha256(to_utf8("e""mail")))'),
        ("timestamp(3) with time zone", "hash", "NULL"),
    ],
)
def test_mask_expressions_fit_the_type(data_type: str | None, style: Any, expected: str) -> None:
    assert mask_expression('e"mail', data_type, style) == expected


def test_column_urns_map_to_the_tenants_trino_columns() -> None:
    urn = "urn:metalake:trino:metalake/lake/acme_eu/People/EMail"
    assert column_for_urn(urn, schema="acme_eu", catalog="lake", instance="metalake") == TrinoColumn(
        "acme_eu", "people", "email"
    )
    table = "urn:metalake:trino:metalake/lake/acme_eu/people"
    assert column_for_urn(table, schema="acme_eu", catalog="lake", instance="metalake") == TrinoColumn(
        "acme_eu", "people", None
    )
    for other in (
        "urn:metalake:trino:metalake/lake/globex/people/email",  # another tenant's schema
        "urn:metalake:trino:prod/lake/acme_eu/people/email",  # another Trino
        "urn:metalake:trino:metalake/hive/acme_eu/people/email",  # another catalog
        "urn:metalake:postgres:metalake/lake/acme_eu/people/email",  # another platform
        "urn:metalake:trino:metalake/lake/acme_eu",  # a schema, not a table or column
        "not-a-urn",
    ):
        assert column_for_urn(other, schema="acme_eu", catalog="lake", instance="metalake") is None


def test_tag_patterns() -> None:
    patterns = ["PII", "PII.*", "GDPR", "GDPR.*"]
    assert all(is_masked_tag(t, patterns) for t in ("PII", "PII.email", "GDPR.Art9", "GDPR"))
    assert not any(is_masked_tag(t, patterns) for t in ("pii", "Sensitive", "XPII", "GDPRX"))


def test_write_rules_is_atomic_and_skips_unchanged(tmp_path: Path) -> None:
    path = tmp_path / "etc" / "rules.json"
    rules = build_rules(SERVICES, [TenantAccess("acme")], catalog="lake", schemas=UNKEYED)
    assert write_rules(path, rules) is True
    assert json.loads(path.read_text()) == rules
    assert write_rules(path, rules) is False
    assert sorted(p.name for p in path.parent.iterdir()) == ["rules.json"]  # no temp file left behind
    assert write_rules(path, build_rules(SERVICES, [], catalog="lake", schemas=UNKEYED)) is True
    assert json.loads(path.read_text())["tables"] == [rules["tables"][0]]


def test_a_tenant_may_mirror_another_systems_schema() -> None:
    settings = {
        "trino_sources": [
            {"platform": "postgres", "instance": "prod/eu", "database": "crm", "schema": "public"},
            {"platform": "Not Valid", "instance": "x", "database": "d", "schema": "s"},  # invalid platform
            {"platform": "postgres", "instance": "prod"},  # incomplete
            "postgres",
        ]
    }
    mirrored = mirrored_schemas(settings)
    assert mirrored == [MirroredSchema("postgres", "prod/eu", "crm", "public")]
    assert mirrored[0].urn_prefix == "urn:metalake:postgres:prod%2Feu/crm/public/"
    assert mirrored_schemas({}) == [] and mirrored_schemas({"trino_sources": "x"}) == []
    column = "urn:metalake:postgres:prod%2Feu/crm/public/Customers/Email"
    assert column_for_urn(column, schema="acme", catalog="lake", instance="metalake", mirrored=mirrored) == TrinoColumn(
        "acme", "customers", "email"
    )
    # Without the declaration, or from another schema of the same database: nothing.
    assert column_for_urn(column, schema="acme", catalog="lake", instance="metalake") is None
    other = "urn:metalake:postgres:prod%2Feu/crm/billing/customers/email"
    assert column_for_urn(other, schema="acme", catalog="lake", instance="metalake", mirrored=mirrored) is None
