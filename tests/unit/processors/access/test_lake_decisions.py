"""The lake Trino's OPA decisions: a tenant's user reaches its own schema and information_schema only, nothing at all
while its tenant is suspended, and reads its tenant's tagged columns masked unless it is a ``.pii`` user."""

from __future__ import annotations

from dataclasses import dataclass

from processors.access.lake_decisions import LakePolicy, lake_user
from tenants.access.rules import TENANT_USERS, build_shared_rules
from tenants.trino_schemas import SchemaNamer

NAMER = SchemaNamer(b"k" * 32)
POLICY = LakePolicy(catalog="lake", schemas=NAMER)
ACME, GLOBEX = NAMER.schema("acme"), NAMER.schema("globex")


@dataclass
class _Named:
    catalogName: str | None
    schemaName: str | None
    columns: list[str] | None = None


@dataclass
class _Resource:
    schema_: _Named | None = None
    table: _Named | None = None
    column: _Named | None = None
    function: _Named | None = None


def _table(schema: str, catalog: str = "lake", columns: list[str] | None = None) -> _Resource:
    return _Resource(table=_Named(catalog, schema, columns))


def test_tenant_users_are_read_back_and_anyone_else_is_none() -> None:
    assert lake_user("tenant.acme") == lake_user("tenant.acme")
    parsed = lake_user("tenant.acme-2.admin.pii")
    assert parsed is not None and (parsed.tenant, parsed.admin, parsed.pii) == ("acme-2", True, True)
    for other in ("metalake", "tenant.", "tenant.Acme", "tenant.acme.pii.admin", "xtenant.acme", "tenant.acme.root"):
        assert lake_user(other) is None, other


def test_a_tenant_user_reaches_its_own_schema_and_information_schema_only() -> None:
    assert POLICY.allow("tenant.acme", True, _table(ACME))
    assert POLICY.allow("tenant.acme.pii", True, _Resource(schema_=_Named("lake", "information_schema")))
    assert not POLICY.allow("tenant.acme", True, _table(GLOBEX))
    assert not POLICY.allow("tenant.acme.admin", True, _Resource(schema_=_Named("lake", "_pooled")))
    assert not POLICY.allow("tenant.acme", True, _Resource(function=_Named("lake", GLOBEX)))
    # The id alone is not the schema: the keyed name is.
    assert not POLICY.allow("tenant.acme", True, _table("acme"))
    # Another catalog, or no schema named: the rules file decides.
    assert POLICY.allow("tenant.acme", True, _table(GLOBEX, catalog="system"))
    assert POLICY.allow("tenant.acme", True, _Resource(schema_=_Named("lake", None)))
    assert POLICY.allow("tenant.acme", True, None)


def test_a_suspended_tenants_users_are_refused_everything_and_service_users_allowed() -> None:
    assert not POLICY.allow("tenant.acme", False, None)
    assert not POLICY.allow("tenant.acme.admin.pii", False, _table(ACME))
    assert POLICY.allow("metalake", False, _table(GLOBEX))


def test_filtering_keeps_the_tenants_own_schema_and_a_tables_columns_all_or_none() -> None:
    schemas = [_Resource(schema_=_Named("lake", s)) for s in (GLOBEX, ACME, "information_schema", "_pooled")]
    assert POLICY.batch("FilterSchemas", "tenant.acme", True, schemas) == [1]
    assert POLICY.batch("FilterTables", "tenant.acme", True, [_table("information_schema"), _table(GLOBEX)]) == [0]
    assert POLICY.batch("FilterSchemas", "tenant.acme", False, schemas) == []
    assert POLICY.batch("FilterSchemas", "metalake", True, schemas) == [0, 1, 2, 3]
    own, other = _table(ACME, columns=["a", "b", "c"]), _table(GLOBEX, columns=["a", "b"])
    assert POLICY.batch("FilterColumns", "tenant.acme", True, [own]) == [0, 1, 2]
    assert POLICY.batch("FilterColumns", "tenant.acme", True, [other]) == []


def test_masks_are_the_tenants_tagged_columns_in_its_own_schema_for_users_without_pii() -> None:
    masked = {"customers": {"email": "varchar", "born": None}}
    columns = [
        ("lake", ACME, "customers", "email", "varchar"),
        ("lake", ACME, "customers", "name", "varchar"),
        ("lake", ACME, "customers", "born", "date"),
        ("lake", GLOBEX, "customers", "email", "varchar"),
        ("other", ACME, "customers", "email", "varchar"),
    ]
    assert POLICY.masks("tenant.acme", columns, masked) == [(0, "'****'"), (2, "NULL")]
    assert POLICY.masks("tenant.acme.admin", columns, masked) == [(0, "'****'"), (2, "NULL")]
    assert POLICY.masks("tenant.acme.pii", columns, masked) == []
    assert POLICY.masks("tenant.acme.admin.pii", columns, masked) == []
    assert POLICY.masks("metalake", columns, masked) == []
    hashed = LakePolicy(catalog="lake", schemas=NAMER, mask_style="hash")
    assert hashed.masks("tenant.acme", columns[:1], masked) == [(0, 'to_hex(sha256(to_utf8("email")))')]


def test_the_shared_rules_name_no_tenant_and_keep_every_tenant_wide_refusal() -> None:
    rules = build_shared_rules(["metalake", "bench"], catalog="lake", impersonator="metalake")
    tables = rules["tables"]
    assert "acme" not in str(rules)
    # First match wins: the refusals come before the tenant users' SELECT on the catalog.
    assert tables[-1] == {"user": TENANT_USERS, "catalog": "^(lake)$", "privileges": ["SELECT"]}
    refusals = tables[1:-1]
    assert {"user": TENANT_USERS, "table": r".*\$.*", "privileges": []} in refusals
    assert any(r.get("schema") == "^(_pooled)$" and r["privileges"] == [] for r in refusals)
    admin_only = next(r for r in refusals if r.get("table") == "^(_dlq|audit)$")
    assert admin_only["privileges"] == [] and ".admin" not in admin_only["user"]
    assert {"user": TENANT_USERS, "catalog": "^(lake)$", "allow": "read-only"} in rules["catalogs"]
