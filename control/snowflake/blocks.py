"""The column statements of the Snowflake masking script, as Snowflake Scripting blocks that ask Snowflake first.

The catalog is writer-controlled: a producer's ``data_type`` must not decide which policy a column gets, and no
script may replace or remove a policy metalake did not create. So each column's ``SET`` or ``UNSET`` runs in an
anonymous block (``EXECUTE IMMEDIATE $$ ... $$``) that

- counts the masking policies on the column that are not metalake's (``INFORMATION_SCHEMA.POLICY_REFERENCES``;
  metalake's are named ``<prefix>_...`` and live in the column's schema or the database's policy schema): a column
  holding another policy is left as it is (``KEPT``), neither replaced (``FORCE``) nor removed (``UNSET``);
- takes the policy from the column's type **in Snowflake** (``INFORMATION_SCHEMA.COLUMNS``), among the policies the
  script created in that home (a fixed allowlist of types, :data:`BASE_TYPES`, plus the precisions the catalog
  names): the catalogued type never picks the policy; a type with no policy there is reported (``NOT MASKED``);
- answers one line (``MASKED``, ``UNSET``, ``KEPT``, ``NOT MASKED``, ``NOT UNSET``: what a run shows), and turns any
  error (a table dropped since) into such a line instead of stopping the script.

A block's text must not hold ``$$`` (it would end the block): a column whose names would put one there is refused
(:class:`control.snowflake.sql.UnsafeName`), and the script lists it as not masked.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from control.snowflake.sql import CONTROL, PolicyType, UnsafeName, policy_type, qualified

# The policies every home gets, whatever the catalog says: each a type with one signature in Snowflake.
_BASE_NAMES = ("VARCHAR", "BINARY", "NUMBER", "FLOAT", "BOOLEAN", "DATE", "TIME", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ")
BASE_TYPES: tuple[PolicyType, ...] = tuple(
    kind for name in (*_BASE_NAMES, "TIMESTAMP_TZ", "VARIANT", "OBJECT", "ARRAY") if (kind := policy_type(name))
)
_PRECISION = re.compile(r"([A-Z_]+)\((\d+)(?:,(\d+))?\)")
_DATETIME = ("TIME", "TIMESTAMP_NTZ", "TIMESTAMP_LTZ", "TIMESTAMP_TZ")


@dataclass(frozen=True)
class Target:
    """One column, its names as Snowflake holds them (already folded), and metalake's homes for its policies."""

    database: str
    schema: str
    table: str
    column: str
    view: bool
    urn: str
    # The schemas of ``database`` where metalake keeps policies, and their names' prefix (``<prefix>_<TYPE>``).
    home_schemas: Sequence[str]
    prefix: str


def type_predicate(kind: PolicyType) -> str:
    """The ``INFORMATION_SCHEMA.COLUMNS`` condition of a column whose type is exactly the policy's signature."""
    if kind.sql == "VARCHAR":
        return "DATA_TYPE = 'TEXT'"
    if kind.sql == "NUMBER":
        return "DATA_TYPE = 'NUMBER' AND NUMERIC_PRECISION = 38 AND NUMERIC_SCALE = 0"
    if kind.sql in _DATETIME:
        return f"DATA_TYPE = '{kind.sql}' AND DATETIME_PRECISION = 9"
    match = _PRECISION.fullmatch(kind.sql)
    if match is None:
        return f"DATA_TYPE = '{kind.sql}'"
    base, first, second = match.groups()
    if base == "NUMBER":
        return f"DATA_TYPE = 'NUMBER' AND NUMERIC_PRECISION = {int(first)} AND NUMERIC_SCALE = {int(second)}"
    return f"DATA_TYPE = '{base}' AND DATETIME_PRECISION = {int(first)}"


def text(value: str) -> str:
    """A string literal of any length (names, URNs in messages): ``'`` doubled, ``\\`` escaped, no control chars."""
    return "'" + CONTROL.sub("?", value).replace("\\", "\\\\").replace("'", "''") + "'"


def _count_foreign(target: Target) -> str:
    homes = ", ".join(text(s) for s in sorted(set(target.home_schemas)))
    table = qualified(target.database, target.schema, target.table)
    # Every name is a quoted identifier or an escaped literal.
    return (
        f"SELECT COUNT(*) INTO :foreign_policies FROM TABLE({qualified(target.database)}."  # noqa: S608
        "INFORMATION_SCHEMA."
        f"POLICY_REFERENCES(REF_ENTITY_NAME => {text(table)}, REF_ENTITY_DOMAIN => "
        f"'{'VIEW' if target.view else 'TABLE'}')) WHERE POLICY_KIND = 'MASKING_POLICY' AND REF_COLUMN_NAME = "
        f"{text(target.column)} AND NOT (POLICY_DB = {text(target.database)} AND POLICY_SCHEMA IN ({homes}) AND "
        f"STARTSWITH(POLICY_NAME, {text(target.prefix + '_')}));"
    )


def _alter(target: Target) -> str:
    table = qualified(target.database, target.schema, target.table)
    kind = "VIEW" if target.view else "TABLE"
    return f"ALTER {kind} IF EXISTS {table} MODIFY COLUMN {qualified(target.column)}"


def _block(declare: list[str], body: list[str], target: Target, failed: str) -> str:
    urn = text(": " + target.urn.replace("$", "%24"))
    lines = [
        "EXECUTE IMMEDIATE $$",
        "DECLARE",
        *(f"  {d}" for d in declare),
        "BEGIN",
        f"  {_count_foreign(target)}",
        "  IF (foreign_policies > 0) THEN",
        f"    RETURN 'KEPT (a masking policy metalake did not create)' || {urn};",
        "  END IF;",
        *(f"  {line}" for line in body),
        "EXCEPTION",
        f"  WHEN OTHER THEN RETURN '{failed} (' || SQLERRM || ')' || {urn};",
        "END;",
        "$$;",
    ]
    inner = "\n".join(lines[1:-1])
    if "$$" in inner:
        raise UnsafeName("a name would end the Snowflake Scripting block ($$)")
    return "\n".join(lines)


def set_block(target: Target, policies: Mapping[PolicyType, str]) -> str:
    """Mask the column with the home's policy of its Snowflake type (``policies``: type -> qualified policy name),
    unless a policy metalake did not create is on it."""
    cases = " ".join(f"WHEN {type_predicate(k)} THEN {text(policies[k])}" for k in sorted(policies))
    alter = text(_alter(target) + " SET MASKING POLICY ")
    urn = text(": " + target.urn.replace("$", "%24"))
    # Every name is a quoted identifier or an escaped literal.
    body = [
        f"SELECT MAX(CASE {cases} END) INTO :chosen_policy FROM {qualified(target.database)}."  # noqa: S608
        "INFORMATION_SCHEMA.COLUMNS "
        f"WHERE TABLE_SCHEMA = {text(target.schema)} AND TABLE_NAME = {text(target.table)} AND COLUMN_NAME = "
        f"{text(target.column)};",
        "IF (chosen_policy IS NULL) THEN",
        f"  RETURN 'NOT MASKED (its type in Snowflake has no metalake policy here)' || {urn};",
        "END IF;",
        f"EXECUTE IMMEDIATE {alter} || chosen_policy || ' FORCE';",
        f"RETURN 'MASKED' || {urn};",
    ]
    return _block(["foreign_policies INTEGER;", "chosen_policy VARCHAR;"], body, target, "NOT MASKED")


def unset_block(target: Target) -> str:
    """Take metalake's policy off the column; a policy metalake did not create stays."""
    urn = text(": " + target.urn.replace("$", "%24"))
    body = [f"{_alter(target)} UNSET MASKING POLICY;", f"RETURN 'UNSET' || {urn};"]
    return _block(["foreign_policies INTEGER;"], body, target, "NOT UNSET")
