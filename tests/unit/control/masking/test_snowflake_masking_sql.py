"""Snowflake quoting and the policy signature of each column type."""

from __future__ import annotations

import pytest

from control.snowflake.sql import PolicyType, UnsafeName, ident, literal, policy_type, qualified
from tests._support.snowsql import shape, statements


@pytest.mark.parametrize(
    ("data_type", "expected"),
    [
        ("VARCHAR(16777216)", ("VARCHAR", "VARCHAR")),
        ("varchar", ("VARCHAR", "VARCHAR")),
        ("TEXT", ("VARCHAR", "VARCHAR")),
        ("STRING", ("VARCHAR", "VARCHAR")),
        ("CHAR(2)", ("VARCHAR", "VARCHAR")),
        ("character varying(10)", ("VARCHAR", "VARCHAR")),
        ("NUMBER(38,0)", ("NUMBER", "NUMBER")),
        ("NUMBER", ("NUMBER", "NUMBER")),
        ("INTEGER", ("NUMBER", "NUMBER")),
        ("bigint", ("NUMBER", "NUMBER")),
        ("NUMBER(10, 2)", ("NUMBER(10,2)", "NUMBER_10_2")),
        ("DECIMAL(12)", ("NUMBER(12,0)", "NUMBER_12_0")),
        ("FLOAT", ("FLOAT", "FLOAT")),
        ("DOUBLE PRECISION", ("FLOAT", "FLOAT")),
        ("BOOLEAN", ("BOOLEAN", "BOOLEAN")),
        ("DATE", ("DATE", "DATE")),
        ("TIMESTAMP_NTZ(9)", ("TIMESTAMP_NTZ", "TIMESTAMP_NTZ")),
        ("DATETIME", ("TIMESTAMP_NTZ", "TIMESTAMP_NTZ")),
        ("TIMESTAMP", ("TIMESTAMP_NTZ", "TIMESTAMP_NTZ")),
        ("TIMESTAMP_LTZ(3)", ("TIMESTAMP_LTZ(3)", "TIMESTAMP_LTZ_3")),
        ("timestamp with time zone", ("TIMESTAMP_TZ", "TIMESTAMP_TZ")),
        ("TIME", ("TIME", "TIME")),
        ("VARIANT", ("VARIANT", "VARIANT")),
        ("OBJECT", ("OBJECT", "OBJECT")),
        ("ARRAY", ("ARRAY", "ARRAY")),
        ("BINARY(8)", ("BINARY", "BINARY")),
        ("GEOGRAPHY", ("GEOGRAPHY", "GEOGRAPHY")),
    ],
)
def test_each_snowflake_type_maps_to_a_policy_signature(data_type: str, expected: tuple[str, str]) -> None:
    assert policy_type(data_type) == PolicyType(*expected)


@pytest.mark.parametrize(
    "data_type",
    [None, "", "VECTOR(FLOAT, 3)", "ARRAY(NUMBER)", "NUMBER(40,0)", "NUMBER(5,6)", "INT(3)", "blob", "DATE; DROP"],
)
def test_unknown_or_unmaskable_types_have_no_policy(data_type: str | None) -> None:
    assert policy_type(data_type) is None


def test_identifiers_are_always_quoted_and_quotes_doubled() -> None:
    assert ident("EMAIL") == '"EMAIL"'
    assert ident("Email") == '"Email"'
    assert ident('we"ird') == '"we""ird"'
    assert ident("email") == '"email"'
    assert ident("email", fold_lowercase=True) == '"EMAIL"'
    # Only names a tool could have written unquoted are folded.
    assert ident("first name", fold_lowercase=True) == '"first name"'
    assert ident("e-mail", fold_lowercase=True) == '"e-mail"'
    assert qualified("db", "My Schema", "t", fold_lowercase=True) == '"DB"."My Schema"."T"'


def test_string_literals_escape_quotes_and_backslashes() -> None:
    assert literal("PII_READER") == "'PII_READER'"
    assert literal("it's") == "'it''s'"
    # A trailing backslash would otherwise escape the closing quote.
    assert literal("evil\\") == "'evil\\\\'"
    [tokens] = statements(f"SELECT {literal(chr(92) + chr(39) + ') OR TRUE --')}")
    assert shape(tokens) == ["SELECT", "'\\') OR TRUE --'"]


@pytest.mark.parametrize("name", ["", "a\nb", "x\x00", "y" * 256])
def test_names_snowflake_cannot_hold_are_refused(name: str) -> None:
    with pytest.raises(UnsafeName):
        ident(name)
    with pytest.raises(UnsafeName):
        literal(name)
