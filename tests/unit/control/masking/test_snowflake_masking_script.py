"""The Snowflake masking script: policies of a fixed allowlist of types, column blocks that pick the policy by the
column's type in Snowflake and leave alone policies metalake did not create, quoting against injection, convergence
(UNSET), scopes, accounts."""

from __future__ import annotations

import re

import pytest
from sqlglot import exp

from control.snowflake.blocks import BASE_TYPES, type_predicate
from control.snowflake.masking import Options, SeveralAccounts, SnowflakeColumn, build_script, policy_body
from control.snowflake.sql import PolicyType, UnsafeName, policy_type
from metalake.urn import asset_urn
from tests._support.snowsql import block_tokens, blocks, body_expression, shape, statements

ROLES = Options(roles=("PII_READER", "ANALYST_PII"))


def col(
    table: str, column: str, data_type: str | None, *, db: str = "SHOP", schema: str = "PUBLIC", acct: str = "xy12345"
) -> SnowflakeColumn:
    return SnowflakeColumn(
        acct, db, schema, table, column, data_type, asset_urn("snowflake", acct, db, schema, table, column)
    )


MASKED = [
    col("ORDERS", "GEO", None),
    col("CUSTOMERS", "EMAIL", "VARCHAR(256)"),
    col("ORDERS", "CUSTOMER_NAME", "TEXT"),
    col("CUSTOMERS", "BIRTH_DATE", "DATE"),
    col("ORDERS", "AMOUNT", "NUMBER(10,2)"),
]
SEEN = "CASE WHEN IS_ROLE_IN_SESSION('PII_READER') OR IS_ROLE_IN_SESSION('ANALYST_PII') THEN val ELSE"
COMMENT = "COMMENT = 'managed by metalake: PII masking; regenerated, do not edit';"


def _unquote(literal: str) -> str:
    """A Snowflake string literal's value (as the block's EXECUTE IMMEDIATE runs it)."""
    return literal[1:-1].replace("''", "'").replace("\\\\", "\\")


def _block_of(sql: str, column: str) -> str:
    found: list[str] = [b for b in blocks(sql) if f'MODIFY COLUMN "{column}"' in b]
    assert len(found) == 1
    return found[0]


def test_policies_are_a_fixed_allowlist_plus_the_catalogued_precisions() -> None:
    script = build_script("acme", MASKED, [col("CUSTOMERS", "PHONE", "VARCHAR")], ROLES, pii_tags=("PII", "PII.*"))
    assert (script.account, script.masked, script.unset, script.skipped) == ("xy12345", 5, 1, ())
    assert script.policies == len(BASE_TYPES) + 1  # NUMBER(10,2) named by the catalog
    creates = [line for line in script.sql.splitlines() if line.startswith("CREATE MASKING POLICY")]
    varchar = '"SHOP"."PUBLIC"."METALAKE_PII_VARCHAR" AS (val VARCHAR) RETURNS VARCHAR'
    assert f"CREATE MASKING POLICY IF NOT EXISTS {varchar} -> {SEEN} '****' END {COMMENT}" in creates
    assert any('"METALAKE_PII_NUMBER_10_2" AS (val NUMBER(10,2)) RETURNS NUMBER(10,2)' in c for c in creates)
    # Every statement outside the blocks parses as one statement; the blocks are one each.
    assert len(statements(script.sql)) == 2 * script.policies + script.masked + script.unset
    assert len(blocks(script.sql)) == script.masked + script.unset


def test_the_policy_is_picked_by_the_columns_type_in_snowflake_never_by_the_catalog() -> None:
    """A writer's data_type decides nothing: the block reads the type from INFORMATION_SCHEMA.COLUMNS, and a column
    of unknown or lying catalogued type is masked by its real type's policy."""
    lying = col("CUSTOMERS", "EMAIL", "BOOLEAN")
    unknown = col("ORDERS", "GEO", None)
    script = build_script("acme", [lying, unknown], [], ROLES)
    assert (script.masked, script.skipped) == (2, ())
    for column in ("EMAIL", "GEO"):
        block = _block_of(script.sql, column)
        assert "FROM \"SHOP\".INFORMATION_SCHEMA.COLUMNS WHERE TABLE_SCHEMA = 'PUBLIC'" in block
        assert 'WHEN DATA_TYPE = \'TEXT\' THEN \'"SHOP"."PUBLIC"."METALAKE_PII_VARCHAR"\'' in block
        assert "SET MASKING POLICY ' || chosen_policy || ' FORCE'" in block
        assert "IF (chosen_policy IS NULL) THEN" in block and "NOT MASKED" in block


@pytest.mark.parametrize(
    ("data_type", "predicate"),
    [
        ("VARCHAR(16)", "DATA_TYPE = 'TEXT'"),
        ("INT", "DATA_TYPE = 'NUMBER' AND NUMERIC_PRECISION = 38 AND NUMERIC_SCALE = 0"),
        ("NUMBER(10,2)", "DATA_TYPE = 'NUMBER' AND NUMERIC_PRECISION = 10 AND NUMERIC_SCALE = 2"),
        ("TIMESTAMP_TZ(3)", "DATA_TYPE = 'TIMESTAMP_TZ' AND DATETIME_PRECISION = 3"),
        ("TIMESTAMP", "DATA_TYPE = 'TIMESTAMP_NTZ' AND DATETIME_PRECISION = 9"),
        ("DATE", "DATA_TYPE = 'DATE'"),
    ],
)
def test_each_policy_matches_exactly_its_signature_in_information_schema(data_type: str, predicate: str) -> None:
    kind = policy_type(data_type)
    assert kind is not None and type_predicate(kind) == predicate


def test_a_policy_metalake_did_not_create_is_never_replaced_nor_unset() -> None:
    script = build_script("acme", [col("CUSTOMERS", "EMAIL", "VARCHAR")], [col("CUSTOMERS", "PHONE", "VARCHAR")], ROLES)
    for column in ("EMAIL", "PHONE"):
        block = _block_of(script.sql, column)
        check = block.index('POLICY_REFERENCES(REF_ENTITY_NAME => \'"SHOP"."PUBLIC"."CUSTOMERS"\'')
        kept = block.index("RETURN 'KEPT (a masking policy metalake did not create)'")
        alter = block.index('MODIFY COLUMN "')
        # The count of foreign policies comes first, and a column holding one returns before any ALTER.
        assert check < kept < alter
        assert "REF_COLUMN_NAME = '" + column + "'" in block
        assert "AND NOT (POLICY_DB = 'SHOP' AND POLICY_SCHEMA IN ('METALAKE', 'PUBLIC') AND " in block
        assert "STARTSWITH(POLICY_NAME, 'METALAKE_PII_'))" in block
        # An error (a table dropped since) is a line of the run, not the end of the script.
        assert "EXCEPTION\n  WHEN OTHER THEN RETURN" in block
    assert "UNSET MASKING POLICY" in _block_of(script.sql, "PHONE")
    # Outside the blocks nothing touches a column.
    outside = script.sql.split("EXECUTE IMMEDIATE $$")[0]
    assert "MODIFY COLUMN" not in outside and "FORCE" not in outside


def test_the_same_tags_give_the_same_script_whatever_the_order() -> None:
    first = build_script("acme", MASKED, [], ROLES).sql
    assert build_script("acme", list(reversed(MASKED)), [], ROLES).sql == first


def test_a_rerun_after_a_tag_is_withdrawn_unsets_only_that_column() -> None:
    email = col("CUSTOMERS", "EMAIL", "VARCHAR(256)")
    after = build_script("acme", [c for c in MASKED if c != email], [email], ROLES)
    unset = [b for b in blocks(after.sql) if "UNSET MASKING POLICY" in b]
    assert len(unset) == 1 and 'MODIFY COLUMN "EMAIL" UNSET MASKING POLICY;' in unset[0]
    assert not any("'EMAIL'" in b for b in blocks(after.sql) if b not in unset)
    # Every statement is one that succeeds again on a second run: nothing creates without IF NOT EXISTS.
    for tokens in statements(after.sql):
        words = shape(tokens)
        if words[0] == "CREATE":
            assert words[3:6] == ["IF", "NOT", "EXISTS"]


def test_a_column_both_tagged_and_withdrawn_stays_masked() -> None:
    email = col("CUSTOMERS", "EMAIL", "VARCHAR")
    script = build_script("acme", [email], [email], ROLES)
    assert (script.masked, script.unset) == (1, 0)


def test_names_are_quoted_so_no_name_can_inject_sql() -> None:
    hostile = [
        col('ORD"ERS', 'x" UNSET MASKING POLICY; DROP TABLE t; --', "VARCHAR", schema="My Schema"),
        col("T", "a'b\\", "NUMBER", db="db.with.dots"),
        col("T", "name\nDROP TABLE t", "VARCHAR"),
        col("T", "ends $$; DROP TABLE t; $$", "VARCHAR"),
    ]
    roles = Options(roles=("PII'); DROP TABLE t; --", "R\\"))
    script = build_script("acme", hostile, [], roles)
    assert sorted(c.column for c, _ in script.skipped) == ["ends $$; DROP TABLE t; $$", "name\nDROP TABLE t"]
    assert {reason for _, reason in script.skipped} == {"a name Snowflake cannot hold"}
    # Policies (CREATE + SET BODY each) and one block per maskable column: no statement more.
    assert len(statements(script.sql)) == 2 * script.policies + 2
    strings = [t.text for b in blocks(script.sql) for t in block_tokens(b) if t.token_type.name == "STRING"]
    # The ALTER a block runs is one string literal; read as SQL, each name is one quoted identifier in it.
    alters = [_unquote(m) for b in blocks(script.sql) for m in re.findall(r"EXECUTE IMMEDIATE ('(?:[^']|'')*')", b)]
    assert len(alters) == 2
    identifiers = [t.text for a in alters for t in block_tokens(a) if t.token_type.name == "IDENTIFIER"]
    assert 'x" UNSET MASKING POLICY; DROP TABLE t; --' in identifiers
    assert 'ORD"ERS' in identifiers and "My Schema" in identifiers and "a'b\\" in identifiers
    assert "db.with.dots" in identifiers
    assert all(shape(block_tokens(a))[-3:] == ["SET", "MASKING", "POLICY"] for a in alters)
    assert 'x" UNSET MASKING POLICY; DROP TABLE t; --' in strings  # REF_COLUMN_NAME, one literal
    policy_strings = [t.text for tokens in statements(script.sql) for t in tokens if t.token_type.name == "STRING"]
    assert "PII'); DROP TABLE t; --" in policy_strings and "R\\" in policy_strings
    # The newline in the skipped column's URN is percent-encoded in its comment.
    assert "name%0ADROP" in script.sql


def test_lower_case_names_from_tools_are_folded_and_meet_the_crawlers() -> None:
    dbt = col("orders", "email", "varchar", db="shop", schema="public")
    crawler = col("ORDERS", "EMAIL", "VARCHAR(100)")
    script = build_script("acme", [dbt], [crawler], ROLES)
    # One Snowflake column: masked once, never also unset.
    assert (script.masked, script.unset) == (1, 0)
    assert 'ALTER TABLE IF EXISTS "SHOP"."PUBLIC"."ORDERS" MODIFY COLUMN "EMAIL" SET' in script.sql
    unfolded = build_script("acme", [dbt], [], Options(roles=("R",), fold_lowercase=False))
    assert '"shop"."public"."orders" MODIFY COLUMN "email"' in unfolded.sql


def test_database_scope_puts_the_policies_in_the_policy_schema() -> None:
    columns = [col("T", "A", "VARCHAR", schema="S1"), col("T", "B", "VARCHAR", schema="S2")]
    script = build_script("acme", columns, [], Options(roles=("R",), scope="database", policy_schema="GOVERNANCE"))
    words = [shape(tokens) for tokens in statements(script.sql)]
    assert words[0] == ["CREATE", "SCHEMA", "IF", "NOT", "EXISTS", '"SHOP"', ".", '"GOVERNANCE"']
    assert script.policies == len(BASE_TYPES)
    assert script.sql.count('\'"SHOP"."GOVERNANCE"."METALAKE_PII_VARCHAR"\'') == 2
    per_schema = build_script("acme", columns, [], Options(roles=("R",)))
    assert per_schema.policies == 2 * len(BASE_TYPES)


def test_mask_styles_and_no_roles() -> None:
    text, number = PolicyType("VARCHAR", "VARCHAR"), PolicyType("NUMBER", "NUMBER")
    assert policy_body(text, Options(roles=("R",), mask_style="hash")).endswith("ELSE SHA2(val, 256) END")
    assert policy_body(text, Options(roles=("R",), mask_style="null")).endswith("ELSE NULL END")
    assert policy_body(number, Options(roles=("R",), mask_style="hash")).endswith("ELSE NULL END")
    # Nobody sees PII without a configured role; the CASE keeps the body's type the column's.
    assert policy_body(text, Options()) == "CASE WHEN FALSE THEN val ELSE '****' END"
    for body in (policy_body(text, ROLES), policy_body(text, Options(mask_style="hash"))):
        assert body_expression(body).find(exp.Case) is not None


def test_columns_of_several_accounts_need_one_named() -> None:
    columns = [col("T", "A", "VARCHAR"), col("T", "A", "VARCHAR", acct="other")]
    with pytest.raises(SeveralAccounts) as raised:
        build_script("acme", columns, [], ROLES)
    assert raised.value.accounts == ("other", "xy12345")
    script = build_script("acme", columns, [], ROLES, account="other")
    assert (script.account, script.masked) == ("other", 1)


def test_an_empty_tenant_gets_a_script_that_does_nothing() -> None:
    script = build_script("acme", [], [], ROLES)
    assert statements(script.sql) == []
    assert script.account is None


def test_a_role_snowflake_cannot_hold_is_refused() -> None:
    with pytest.raises(UnsafeName):
        build_script("acme", MASKED, [], Options(roles=("bad\nrole",)))


def test_columns_of_views_are_altered_through_alter_view() -> None:
    view = SnowflakeColumn("xy12345", "SHOP", "MARTS", "CUSTOMER_360", "EMAIL", "VARCHAR", "urn:...", view=True)
    withdrawn = SnowflakeColumn("xy12345", "SHOP", "MARTS", "CUSTOMER_360", "PHONE", "VARCHAR", "urn:...", view=True)
    script = build_script("acme", [view], [withdrawn], ROLES)
    for column in ("EMAIL", "PHONE"):
        block = _block_of(script.sql, column)
        assert 'ALTER VIEW IF EXISTS "SHOP"."MARTS"."CUSTOMER_360" MODIFY COLUMN' in block
        assert "REF_ENTITY_DOMAIN => 'VIEW'" in block


def test_a_urn_shown_in_a_message_or_comment_cannot_end_it() -> None:
    # Stored URNs are canonical (percent-encoded); a non-canonical one must still not start a statement.
    odd = SnowflakeColumn("xy12345", "SHOP", "PUBLIC", "T", "C", None, "urn:x\nDROP TABLE t; $$ x")
    script = build_script("acme", [odd], [], ROLES)
    assert len(blocks(script.sql)) == 1 and "urn:x?DROP TABLE t; %24%24 x" in script.sql
    assert len(statements(script.sql)) == 2 * script.policies + 1
