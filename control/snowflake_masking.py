"""A tenant's Snowflake masking script, as a pure function of its PII-tagged columns: idempotent, converging SQL.

For one Snowflake account: one masking policy per column type per schema (or per database, in a schema of its own),
named ``<prefix>_<TYPE>`` (``METALAKE_PII_VARCHAR``, ``METALAKE_PII_NUMBER_10_2``...), whose body shows the value to
the roles that see PII (``IS_ROLE_IN_SESSION``, so a role granted those roles or a secondary role counts too) and the
mask to everyone else; every tagged column gets its type's policy (``SET MASKING POLICY ... FORCE``, which replaces
a policy already there, ours or an older one, without a moment unmasked); every column whose PII tag was withdrawn
gets ``UNSET MASKING POLICY``. Each statement is safe to run again: ``CREATE ... IF NOT EXISTS`` then ``ALTER ... SET
BODY`` (so a changed role list reaches policies made earlier), ``ALTER TABLE IF EXISTS`` (``ALTER VIEW`` for a view;
a table dropped since is skipped). Columns whose type metalake does not know are listed in a comment, not guessed.

Beside it: ``control.snowflake_sql`` (quoting, column types to signatures), ``control.snowflake_inventory`` (the
tenant's tagged columns from MongoDB), ``control.snowflake_policies`` (both together, for ``GET
/v1/tenants/{tenant}/masking/snowflake`` and ``metalake masking snowflake-policies``). See docs/snowflake.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from control.snowflake_sql import (
    CONTROL,
    PolicyType,
    UnsafeName,
    check_name,
    folded,
    ident,
    literal,
    policy_type,
    qualified,
)

MaskStyle = Literal["redact", "hash", "null"]
Scope = Literal["schema", "database"]
REDACTED = "****"


@dataclass(frozen=True, order=True)
class SnowflakeColumn:
    """A column of a Snowflake table, from its asset URN (instance: the account), with its catalogued type."""

    account: str
    database: str
    schema: str
    table: str
    column: str
    data_type: str | None = field(default=None, compare=False)
    # The canonical URN, shown in comments (percent-encoded: it cannot break out of one).
    urn: str = field(default="", compare=False)
    # The table is a view (its asset's kind): views take ALTER VIEW, which Snowflake requires for their columns.
    view: bool = field(default=False, compare=False)


@dataclass(frozen=True)
class Options:
    roles: Sequence[str] = ()
    mask_style: MaskStyle = "redact"
    scope: Scope = "schema"
    policy_schema: str = "METALAKE"
    prefix: str = "METALAKE_PII"
    fold_lowercase: bool = True


@dataclass(frozen=True)
class Script:
    sql: str
    account: str | None
    policies: int
    masked: int
    unset: int
    # Tagged columns the script cannot mask, each with the reason.
    skipped: tuple[tuple[SnowflakeColumn, str], ...]


class SeveralAccounts(ValueError):
    """Columns of more than one account: a script runs in one, so the caller must name it."""

    def __init__(self, accounts: Sequence[str]) -> None:
        super().__init__(f"the tenant has Snowflake columns in {len(accounts)} accounts: name one")
        self.accounts = tuple(accounts)


def mask_expression(kind: PolicyType, style: MaskStyle) -> str:
    """What a masked value reads as: a constant or a hash for text (per ``style``), NULL for every other type."""
    if kind.is_text and style == "redact":
        return literal(REDACTED)
    if kind.is_text and style == "hash":
        return "SHA2(val, 256)"
    return "NULL"


def policy_body(kind: PolicyType, options: Options) -> str:
    # The CASE keeps the body's type the column's even when the mask is a bare NULL; with no role, nobody sees PII.
    seen = " OR ".join(f"IS_ROLE_IN_SESSION({literal(r)})" for r in options.roles) or "FALSE"
    return f"CASE WHEN {seen} THEN val ELSE {mask_expression(kind, options.mask_style)} END"


def _policy_home(column: SnowflakeColumn, options: Options) -> tuple[str, str]:
    if options.scope == "database":
        return column.database, options.policy_schema
    return column.database, column.schema


def _alter_column(column: SnowflakeColumn, options: Options) -> str:
    fold = options.fold_lowercase
    table = qualified(column.database, column.schema, column.table, fold_lowercase=fold)
    kind = "VIEW" if column.view else "TABLE"
    return f"ALTER {kind} IF EXISTS {table} MODIFY COLUMN {ident(column.column, fold_lowercase=fold)}"


def _comment(text: str, *, prefix: str = "-- ") -> str:
    """Text for a ``--`` comment: a control character (a line break) would end it and start a statement."""
    return prefix + CONTROL.sub("?", text)


def _identities(
    columns: Iterable[SnowflakeColumn], account: str | None, fold: bool
) -> dict[SnowflakeColumn, SnowflakeColumn]:
    """The columns of ``account`` (all if None) by the Snowflake column they name: with ``fold``, ``orders.email`` (a
    tool's unquoted spelling) and ``ORDERS.EMAIL`` (the crawler's) are one. Of several URNs naming one column, the
    first by URN with a known type wins, so the answer does not depend on the input's order."""
    out: dict[SnowflakeColumn, SnowflakeColumn] = {}
    for column in sorted(columns, key=lambda c: (c.data_type is None, c.urn)):
        if account is not None and column.account != account:
            continue
        parts = (column.database, column.schema, column.table, column.column)
        database, schema, table, name = (folded(p, fold) for p in parts)
        key = SnowflakeColumn(column.account, database, schema, table, name)
        out.setdefault(key, replace(key, data_type=column.data_type, urn=column.urn, view=column.view))
    return out


def _holdable(column: SnowflakeColumn) -> bool:
    try:
        for name in (column.database, column.schema, column.table, column.column):
            check_name(name, "a name")
    except UnsafeName:
        return False
    return True


def _check_options(options: Options) -> None:
    for role in options.roles:
        check_name(role, "a role")
    for name, value in (("prefix", options.prefix), ("policy_schema", options.policy_schema)):
        check_name(value, name)


def build_script(
    tenant: str,
    masked: Iterable[SnowflakeColumn],
    unmasked: Iterable[SnowflakeColumn] = (),
    options: Options = Options(),
    *,
    account: str | None = None,
    pii_tags: Sequence[str] = (),
) -> Script:
    """The script for ``account`` (or the only account the columns are in). ``masked``: columns with a live PII
    tag; ``unmasked``: columns whose PII tag was withdrawn (a column in both is masked). Deterministic: same input,
    same text, so a re-run can be diffed against the last one."""
    _check_options(options)
    masked_set = _identities(masked, account, options.fold_lowercase)
    withdrawn = _identities(unmasked, account, options.fold_lowercase)
    unset = [withdrawn[key] for key in sorted(withdrawn.keys() - masked_set.keys())]
    accounts = sorted({c.account for c in (*masked_set, *unset)})
    if len(accounts) > 1:
        raise SeveralAccounts(accounts)
    chosen = account if account is not None else (accounts[0] if accounts else None)

    typed: list[tuple[SnowflakeColumn, PolicyType]] = []
    skipped: list[tuple[SnowflakeColumn, str]] = []
    for column in (masked_set[key] for key in sorted(masked_set)):
        kind = policy_type(column.data_type)
        if not _holdable(column):
            skipped.append((column, "a name Snowflake cannot hold"))
        elif kind is None:
            skipped.append((column, "type unknown" if not column.data_type else "type not supported"))
        else:
            typed.append((column, kind))
    unset = [c for c in unset if _holdable(c)]
    fold = options.fold_lowercase
    policies = sorted({(*_policy_home(c, options), k) for c, k in typed}, key=lambda p: (p[0], p[1], p[2]))

    tags, roles = ", ".join(pii_tags) or "(none)", ", ".join(options.roles) or "(none)"
    lines = [
        _comment(f"Snowflake masking policies generated by metalake for tenant {tenant}")
        + (_comment(f", account {chosen}", prefix="") if chosen else "")
        + ".",
        _comment(f"PII tags: {tags}. Roles that see PII: {roles}."),
        f"-- {len(typed)} column(s) masked, {len(unset)} unset, {len(skipped)} not masked (listed below).",
        "-- Safe to run again: a re-run converges on the tags metalake holds now.",
    ]
    for column, reason in skipped:
        lines.append(_comment(f"NOT MASKED ({reason}): {column.urn}"))
    if options.scope == "database":
        for database in sorted({db for db, _, _ in policies}):
            lines.append(
                f"CREATE SCHEMA IF NOT EXISTS {qualified(database, options.policy_schema, fold_lowercase=fold)};"
            )
    for database, schema, kind in policies:
        name = _policy_name(database, schema, kind, options)
        body = policy_body(kind, options)
        lines.append(
            f"CREATE MASKING POLICY IF NOT EXISTS {name} AS (val {kind.sql}) RETURNS {kind.sql} -> {body} "
            f"COMMENT = {literal('managed by metalake: PII masking; regenerated, do not edit')};"
        )
        lines.append(f"ALTER MASKING POLICY {name} SET BODY -> {body};")
    for column, kind in typed:
        policy = _policy_name(*_policy_home(column, options), kind, options)
        lines.append(f"{_alter_column(column, options)} SET MASKING POLICY {policy} FORCE;")
    for column in unset:
        lines.append(f"{_alter_column(column, options)} UNSET MASKING POLICY;")
    return Script(
        sql="\n".join(lines) + "\n",
        account=chosen,
        policies=len(policies),
        masked=len(typed),
        unset=len(unset),
        skipped=tuple(skipped),
    )


def _policy_name(database: str, schema: str, kind: PolicyType, options: Options) -> str:
    fold = options.fold_lowercase
    return f"{qualified(database, schema, fold_lowercase=fold)}.{ident(f'{options.prefix}_{kind.suffix}')}"
