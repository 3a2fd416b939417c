"""A tenant's Snowflake masking script, as a pure function of its PII-tagged columns: idempotent, converging SQL.

For one Snowflake account: one masking policy per column type per schema (or per database, in a schema of its own),
named ``<prefix>_<TYPE>`` (``METALAKE_PII_VARCHAR``, ``METALAKE_PII_NUMBER_10_2``...), whose body shows the value to
the roles that see PII (``IS_ROLE_IN_SESSION``, so a role granted those roles or a secondary role counts too) and the
mask to everyone else; every tagged column gets its type's policy (``SET MASKING POLICY ... FORCE``, which replaces
a policy already there, ours or an older one, without a moment unmasked); every column whose PII tag was withdrawn
gets ``UNSET MASKING POLICY``. Each statement is safe to run again: ``CREATE ... IF NOT EXISTS`` then ``ALTER ... SET
BODY`` (so a changed role list reaches policies made earlier), ``ALTER TABLE IF EXISTS`` (``ALTER VIEW`` for a view;
a table dropped since is skipped). Columns whose type metalake does not know are listed in a comment, not guessed.

Beside it: ``control.snowflake.sql`` (quoting, column types to signatures), ``control.snowflake.inventory`` (the
tenant's tagged columns from MongoDB), ``control.snowflake.policies`` (both together, for ``GET
/v1/tenants/{tenant}/masking/snowflake`` and ``metalake masking snowflake-policies``). See docs/snowflake.md.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Literal

from control.snowflake.blocks import BASE_TYPES, Target, set_block, unset_block
from control.snowflake.sql import (
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


Home = tuple[str, str]  # (database, schema) where a column's policies live


def _policy_home(column: SnowflakeColumn, options: Options) -> Home:
    if options.scope == "database":
        return column.database, options.policy_schema
    return column.database, column.schema


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


def _target(column: SnowflakeColumn, options: Options) -> Target:
    fold = options.fold_lowercase
    database, schema, table, name = (
        folded(p, fold) for p in (column.database, column.schema, column.table, column.column)
    )
    homes = (schema, folded(options.policy_schema, fold))
    return Target(database, schema, table, name, column.view, column.urn, homes, options.prefix)


def _home_policies(
    typed: Iterable[tuple[SnowflakeColumn, PolicyType | None]], options: Options
) -> dict[Home, set[PolicyType]]:
    """Every home's policies: the fixed allowlist, plus the precisions the catalog names there (harmless if wrong:
    a policy is picked by the column's type in Snowflake)."""
    out: dict[Home, set[PolicyType]] = {}
    for column, kind in typed:
        kinds = out.setdefault(_policy_home(column, options), set(BASE_TYPES))
        if kind is not None:
            kinds.add(kind)
    return out


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

    columns = [masked_set[key] for key in sorted(masked_set)]
    homes = _home_policies(((c, policy_type(c.data_type)) for c in columns if _holdable(c)), options)
    statements, skipped = _set_blocks(columns, homes, options)
    unset_statements = []
    for column in (c for c in unset if _holdable(c)):
        try:
            unset_statements.append(unset_block(_target(column, options)))
        except UnsafeName:
            continue
    lines = _header(tenant, chosen, options, pii_tags, (len(statements), len(unset_statements), len(skipped)))
    lines += [_comment(f"NOT MASKED ({reason}): {column.urn}") for column, reason in skipped]
    lines += _policy_statements(homes, options)
    return Script(
        sql="\n".join([*lines, *statements, *unset_statements]) + "\n",
        account=chosen,
        policies=sum(len(kinds) for kinds in homes.values()),
        masked=len(statements),
        unset=len(unset_statements),
        skipped=tuple(skipped),
    )


def _set_blocks(
    columns: Sequence[SnowflakeColumn], homes: Mapping[Home, set[PolicyType]], options: Options
) -> tuple[list[str], list[tuple[SnowflakeColumn, str]]]:
    """Each maskable column's block, and the columns that cannot be masked with the reason."""
    blocks: list[str] = []
    skipped = [(c, "a name Snowflake cannot hold") for c in columns if not _holdable(c)]
    for column in (c for c in columns if _holdable(c)):
        home = _policy_home(column, options)
        names = {k: _policy_name(*home, k, options) for k in homes[home]}
        try:
            blocks.append(set_block(_target(column, options), names))
        except UnsafeName:
            skipped.append((column, "a name Snowflake cannot hold"))
    return blocks, skipped


def _header(
    tenant: str, account: str | None, options: Options, pii_tags: Sequence[str], counts: tuple[int, int, int]
) -> list[str]:
    tags, roles = ", ".join(pii_tags) or "(none)", ", ".join(options.roles) or "(none)"
    return [
        _comment(f"Snowflake masking policies generated by metalake for tenant {tenant}")
        + (_comment(f", account {account}", prefix="") if account else "")
        + ".",
        _comment(f"PII tags: {tags}. Roles that see PII: {roles}."),
        f"-- {counts[0]} column(s) to mask, {counts[1]} to unset, {counts[2]} not masked (listed below).",
        "-- Each column's block picks the policy by the column's type in Snowflake, and leaves alone a column that",
        "-- holds a masking policy metalake did not create; it answers MASKED, UNSET, KEPT or NOT MASKED.",
        "-- Safe to run again: a re-run converges on the tags metalake holds now.",
    ]


def _policy_statements(homes: Mapping[Home, set[PolicyType]], options: Options) -> list[str]:
    fold = options.fold_lowercase
    lines = []
    if options.scope == "database":
        for database in sorted({db for db, _ in homes}):
            lines.append(
                f"CREATE SCHEMA IF NOT EXISTS {qualified(database, options.policy_schema, fold_lowercase=fold)};"
            )
    for home in sorted(homes):
        for kind in sorted(homes[home]):
            name = _policy_name(*home, kind, options)
            body = policy_body(kind, options)
            lines.append(
                f"CREATE MASKING POLICY IF NOT EXISTS {name} AS (val {kind.sql}) RETURNS {kind.sql} -> {body} "
                f"COMMENT = {literal('managed by metalake: PII masking; regenerated, do not edit')};"
            )
            lines.append(f"ALTER MASKING POLICY {name} SET BODY -> {body};")
    return lines


def _policy_name(database: str, schema: str, kind: PolicyType, options: Options) -> str:
    fold = options.fold_lowercase
    return f"{qualified(database, schema, fold_lowercase=fold)}.{ident(f'{options.prefix}_{kind.suffix}')}"
