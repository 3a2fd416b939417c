"""Snowflake SQL pieces that must be exact: quoted identifiers, string literals, and policy signatures by column type.

Every identifier is double-quoted (``"`` doubled inside), so a name holding a quote, a dot, a space or lower-case
letters names exactly that object and can never end the statement. String literals double ``'`` and escape ``\\``
(Snowflake reads a backslash in a single-quoted string as an escape: doubling quotes alone would let a role name
ending in ``\\`` close the literal).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

# An unquoted Snowflake identifier (it resolves to its upper-case spelling).
_UNQUOTED = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_LOWER_UNQUOTED = re.compile(r"[a-z_][a-z0-9_$]*")
# Control characters have no place in a name or a role; they could also end a ``--`` comment.
CONTROL = re.compile(r"[\x00-\x1f\x7f]")
MAX_IDENTIFIER = 255


class UnsafeName(ValueError):
    """A name Snowflake cannot hold (empty, too long, control characters)."""


def check_name(name: str, what: str) -> str:
    if not name or len(name) > MAX_IDENTIFIER or CONTROL.search(name):
        raise UnsafeName(f"{what} must be 1 to {MAX_IDENTIFIER} characters without control characters")
    return name


def ident(name: str, *, fold_lowercase: bool = False) -> str:
    """``name`` as a double-quoted identifier. With ``fold_lowercase``, an all-lower-case name that is valid unquoted
    is taken to be how a tool spelled an unquoted (hence upper-case) Snowflake name, and upper-cased first."""
    check_name(name, "an identifier")
    return '"' + folded(name, fold_lowercase).replace('"', '""') + '"'


def folded(name: str, fold_lowercase: bool) -> str:
    """The upper-case spelling of an all-lower-case name valid unquoted, if folding; else ``name``."""
    return name.upper() if fold_lowercase and _LOWER_UNQUOTED.fullmatch(name) else name


def qualified(*names: str, fold_lowercase: bool = False) -> str:
    return ".".join(ident(n, fold_lowercase=fold_lowercase) for n in names)


def literal(value: str) -> str:
    """A single-quoted Snowflake string literal holding exactly ``value``."""
    check_name(value, "a string literal")
    return "'" + value.replace("\\", "\\\\").replace("'", "''") + "'"


def is_plain_identifier(name: str) -> bool:
    return bool(_UNQUOTED.fullmatch(name))


@dataclass(frozen=True, order=True)
class PolicyType:
    """The data type of a masking policy's signature (``AS (val <sql>) RETURNS <sql>``) and its name suffix."""

    sql: str
    suffix: str

    @property
    def is_text(self) -> bool:
        return self.sql == "VARCHAR"


_TEXT = frozenset(
    {"VARCHAR", "STRING", "TEXT", "CHAR", "CHARACTER", "NCHAR", "NVARCHAR", "NVARCHAR2", "CHAR VARYING"}
    | {"NCHAR VARYING", "CHARACTER VARYING"}
)
_INTEGER = ("INT", "INTEGER", "BIGINT", "SMALLINT", "TINYINT", "BYTEINT")
_FIXED = ("NUMBER", "DECIMAL", "DEC", "NUMERIC")
_FLOAT = ("FLOAT", "FLOAT4", "FLOAT8", "DOUBLE", "DOUBLE PRECISION", "REAL")
_BINARY = ("BINARY", "VARBINARY")
_SAME = ("BOOLEAN", "DATE", "VARIANT", "OBJECT", "ARRAY", "GEOGRAPHY", "GEOMETRY")
_TIMESTAMPS = {
    "TIMESTAMP_NTZ": "TIMESTAMP_NTZ",
    "DATETIME": "TIMESTAMP_NTZ",
    # TIMESTAMP is an alias whose meaning an account sets (TIMESTAMP_TYPE_MAPPING); NTZ is Snowflake's default.
    "TIMESTAMP": "TIMESTAMP_NTZ",
    "TIMESTAMP WITHOUT TIME ZONE": "TIMESTAMP_NTZ",
    "TIMESTAMP_LTZ": "TIMESTAMP_LTZ",
    "TIMESTAMP WITH LOCAL TIME ZONE": "TIMESTAMP_LTZ",
    "TIMESTAMP_TZ": "TIMESTAMP_TZ",
    "TIMESTAMP WITH TIME ZONE": "TIMESTAMP_TZ",
    "TIME": "TIME",
}
_SHAPE = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_ ]*?)\s*(?:\(\s*([0-9]+)\s*(?:,\s*([0-9]+)\s*)?\))?\s*")


def policy_type(data_type: str | None) -> PolicyType | None:
    """The masking-policy type for a column of this Snowflake type, or None (unknown or not maskable here).

    The signature must match the column's type. Text and binary lengths do not matter (one VARCHAR policy fits
    VARCHAR(16) and STRING alike); precision and scale of NUMBER, and fractional seconds of times and timestamps, are
    kept, so each policy's signature is exactly the column's type. Integer aliases are NUMBER(38,0), i.e. NUMBER.
    """
    if not data_type:
        return None
    match = _SHAPE.fullmatch(data_type)
    if match is None:
        return None
    base = " ".join(match.group(1).upper().split())
    first, second = match.group(2), match.group(3)
    if base in _TEXT:
        return PolicyType("VARCHAR", "VARCHAR")
    if base in _BINARY:
        return PolicyType("BINARY", "BINARY")
    if base in _INTEGER and first is None:
        return PolicyType("NUMBER", "NUMBER")
    if base in _FIXED:
        precision, scale = int(first or 38), int(second or 0)
        if not (1 <= precision <= 38 and 0 <= scale <= precision):
            return None
        if (precision, scale) == (38, 0):
            return PolicyType("NUMBER", "NUMBER")
        return PolicyType(f"NUMBER({precision},{scale})", f"NUMBER_{precision}_{scale}")
    if base in _FLOAT and first is None:
        return PolicyType("FLOAT", "FLOAT")
    if base in _SAME and first is None:
        return PolicyType(base, base)
    if base in _TIMESTAMPS and second is None:
        kind = _TIMESTAMPS[base]
        digits = int(first) if first is not None else 9
        if not 0 <= digits <= 9:
            return None
        if digits == 9:
            return PolicyType(kind, kind)
        return PolicyType(f"{kind}({digits})", f"{kind}_{digits}")
    return None
