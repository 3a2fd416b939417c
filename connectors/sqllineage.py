"""Table and column lineage of one SQL query, parsed with sqlglot. Pure: no I/O.

Both SQL-bearing connectors use it: the PostgreSQL crawler on view definitions, the dbt connector on compiled models.
The caller names the dialect, where unqualified names resolve (``database``, ``search_path``) and the columns of the
tables it knows (to expand ``SELECT *`` and to tell which table an unqualified column of a join comes from).

What counts as lineage:

- **tables**: every table or view the query reads, wherever (FROM, JOIN, CTEs, subqueries in WHERE or SELECT);
  CTE and subquery names are followed to what they read, never reported themselves;
- **columns**: for each output column, the source columns its value is computed from, through aliases, CTEs, derived
  tables, scalar subqueries and set operations (the i-th column of each branch of a UNION). A column used only to
  filter, join or group rows (WHERE, ON, GROUP BY) is not a source of a value and is left out; ``count(*)`` and
  literals have no source column.

Unqualified tables resolve like the engine would: to the first schema of ``search_path`` that holds a known table of
that name, else to the first schema of ``search_path``. Names are compared as the dialect spells them (PostgreSQL
folds unquoted identifiers to lower case; a quoted ``"Orders"`` stays as written).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError
from sqlglot.optimizer.normalize_identifiers import normalize_identifiers
from sqlglot.optimizer.qualify import qualify
from sqlglot.optimizer.scope import Scope, build_scope, traverse_scope
from sqlglot.schema import MappingSchema

# (database, schema, table)
TableName = tuple[str, str, str]

_MAX_EXPRESSION = 1024
# Nesting of views in views is the catalog's business; this bounds recursion through CTEs and derived tables of one
# query, so a pathological definition cannot exhaust the stack.
_MAX_DEPTH = 64


class UnparseableSql(ValueError):
    """The query could not be parsed or resolved; ``reason`` is sqlglot's error class and first line (no SQL text)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, order=True)
class SourceColumn:
    table: TableName
    column: str


@dataclass(frozen=True)
class OutputColumn:
    """One column of the query's result: its name, the source columns of its value and the expression (as SQL)."""

    name: str
    sources: frozenset[SourceColumn]
    expression: str


@dataclass(frozen=True)
class Lineage:
    tables: frozenset[TableName]
    columns: tuple[OutputColumn, ...] = field(default=())

    def column(self, name: str) -> OutputColumn | None:
        return next((c for c in self.columns if c.name == name), None)


def lineage(
    sql: str,
    *,
    dialect: str,
    database: str,
    search_path: Sequence[str],
    tables: Mapping[TableName, Sequence[str]] | None = None,
) -> Lineage:
    """The lineage of ``sql`` (one SELECT, possibly with CTEs and set operations); raises :class:`UnparseableSql`.

    ``tables`` maps the known tables to their column names in order; a table absent from it can still be a source
    (its columns are then taken from how the query uses them, and ``SELECT *`` over it is not expanded).
    """
    known = dict(tables or {})
    if not search_path:
        raise ValueError("search_path needs at least one schema")
    try:
        return _analyse(sql, dialect, database, search_path, known)
    except UnparseableSql:
        raise
    except _PARSER_FAILURES as exc:
        raise UnparseableSql(_reason(exc)) from None


# What sqlglot raises on SQL it cannot read, and what a bug of its own on odd SQL would: one definition must never
# stop a crawl. A RecursionError is a definition nested deeper than Python's stack.
_PARSER_FAILURES = (SqlglotError, RecursionError, ValueError, KeyError, IndexError, AttributeError, TypeError)


def _analyse(
    sql: str, dialect: str, database: str, search_path: Sequence[str], known: dict[TableName, Sequence[str]]
) -> Lineage:
    statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    if len(statements) != 1 or not isinstance(statements[0], exp.Query):
        raise UnparseableSql("not a single query")
    query = statements[0]
    _resolve_tables(query, dialect, database, search_path, known)
    schema = MappingSchema(_nested(known), dialect=dialect, normalize=False)
    # Tables are qualified above (the search_path rule); identifiers are not re-quoted so names stay comparable.
    qualified = qualify(
        query, dialect=dialect, schema=schema, catalog=database, db=search_path[0],
        validate_qualify_columns=False, quote_identifiers=False, identify=False,
    )  # fmt: skip
    root = build_scope(qualified)
    if root is None:
        raise UnparseableSql("no query scope")
    return Lineage(frozenset(_read_tables(root)), tuple(_outputs(root)))


def _reason(exc: BaseException) -> str:
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first[:200]}"


def _name(identifier: exp.Expr | None) -> str:
    return identifier.name if identifier is not None else ""


def _resolve_tables(
    query: exp.Query, dialect: str, database: str, search_path: Sequence[str], known: Mapping[TableName, Sequence[str]]
) -> None:
    """Writes database and schema into every table reference that lacks them, by the search_path rule."""
    normalize_identifiers(query, dialect=dialect)
    ctes = {_name(cte.args.get("alias")) for cte in query.find_all(exp.CTE)}
    by_name: dict[str, list[str]] = {}
    for db, schema, name in known:
        if db == database:
            by_name.setdefault(name, []).append(schema)
    for table in query.find_all(exp.Table):
        if not table.name or not isinstance(table.this, exp.Identifier):
            continue  # a table function (generate_series(...), unnest(...)): no stored relation
        if not table.args.get("db"):
            if table.name in ctes:
                continue
            schemas = by_name.get(table.name, [])
            schema = next((s for s in search_path if s in schemas), search_path[0])
            table.set("db", exp.to_identifier(schema))
        if not table.args.get("catalog"):
            table.set("catalog", exp.to_identifier(database))
        if not table.alias:
            # qualify would alias "Regions" as regions (folded) while columns still say "Regions".x: name it as is.
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name, quoted=table.this.quoted)))


def _nested(known: Mapping[TableName, Sequence[str]]) -> dict[str, object]:
    """The known tables as sqlglot's schema: database -> schema -> table -> column -> type (types play no part)."""
    nested: dict[str, dict[str, dict[str, dict[str, str]]]] = {}
    for (db, schema, table), columns in known.items():
        nested.setdefault(db, {}).setdefault(schema, {})[table] = dict.fromkeys(columns, "unknown")
    out: dict[str, object] = dict(nested)
    return out


def _table_name(table: exp.Table) -> TableName | None:
    if not table.name or not isinstance(table.this, exp.Identifier):
        return None
    return (table.catalog, table.db, table.name)


def _read_tables(root: Scope) -> set[TableName]:
    out: set[TableName] = set()
    for scope in traverse_scope(root.expression):
        for source in scope.sources.values():
            if isinstance(source, exp.Table) and (name := _table_name(source)) is not None:
                out.add(name)
    return out


def _outputs(root: Scope) -> list[OutputColumn]:
    branch = root
    while branch.set_operation_scopes:  # a set operation's columns are named by its leftmost branch
        branch = branch.set_operation_scopes[0]
    select = branch.expression
    if not isinstance(select, exp.Select):
        return []
    out = []
    for i, projection in enumerate(select.expressions):
        name = projection.alias_or_name
        sources = frozenset(_trace_position(root, i, 0))
        expression = projection.this if isinstance(projection, exp.Alias) else projection
        expression = expression.unnest() if isinstance(expression, exp.Paren) else expression
        out.append(OutputColumn(name, sources, expression.sql(dialect="postgres")[:_MAX_EXPRESSION]))
    return out


def _trace_position(scope: Scope, index: int, depth: int) -> set[SourceColumn]:
    """Source columns of the ``index``-th output column of ``scope`` (a SELECT or a set operation)."""
    if depth > _MAX_DEPTH:
        raise UnparseableSql("query nested too deeply")
    if scope.set_operation_scopes:
        out: set[SourceColumn] = set()
        for branch in scope.set_operation_scopes:
            out |= _trace_position(branch, index, depth + 1)
        return out
    select = scope.expression
    if not isinstance(select, exp.Select) or index >= len(select.expressions):
        return set()
    return _trace_expression(scope, select.expressions[index], depth)


def _trace_name(scope: Scope, name: str, depth: int) -> set[SourceColumn]:
    """Source columns of the output column called ``name`` of ``scope``."""
    if not isinstance(scope.expression, (exp.Select, exp.SetOperation)):
        # LATERAL (SELECT ...): the scope is the LATERAL; the query it wraps is a child scope.
        for child in (*scope.subquery_scopes, *scope.derived_table_scopes, *scope.table_scopes):
            if isinstance(child.expression, (exp.Select, exp.SetOperation)):
                return _trace_name(child, name, depth + 1)
        return set()
    branch = scope
    while branch.set_operation_scopes:
        branch = branch.set_operation_scopes[0]
    select = branch.expression
    if not isinstance(select, exp.Select):
        return set()
    names = [p.alias_or_name for p in select.expressions]
    if name in names:
        return _trace_position(scope, names.index(name), depth + 1)
    if scope.outer_columns and name in scope.outer_columns:  # WITH x (a, b) AS (...) renames by position
        return _trace_position(scope, scope.outer_columns.index(name), depth + 1)
    return set()


def _trace_expression(scope: Scope, node: exp.Expr, depth: int) -> set[SourceColumn]:
    out: set[SourceColumn] = set()
    children = {id(s.expression): s for s in scope.subquery_scopes}
    for column, nested in _columns_and_subqueries(node):
        if nested is not None:
            child = children.get(id(nested.unnest() if isinstance(nested, exp.Subquery) else nested))
            if child is not None:
                out |= _trace_position(child, 0, depth + 1)  # a scalar subquery's value is its first column
            continue
        if column is None:
            continue
        source = _source_of(scope, column.table)
        if isinstance(source, exp.Table):
            name = _table_name(source)
            if name is not None:
                out.add(SourceColumn(name, column.name))
        elif isinstance(source, Scope):
            out |= _trace_name(source, column.name, depth + 1)
    return out


def _columns_and_subqueries(node: exp.Expr) -> Iterable[tuple[exp.Column | None, exp.Query | None]]:
    """The columns of ``node`` outside nested queries, and the nested queries themselves (not entered)."""
    stack = [node]
    while stack:
        current = stack.pop()
        if isinstance(current, exp.Query) and current is not node:
            yield None, current
            continue
        if isinstance(current, exp.Column):
            yield current, None
            continue
        stack.extend(current.iter_expressions())


def _source_of(scope: Scope, alias: str) -> exp.Table | Scope | None:
    """What ``alias`` names in ``scope`` or, for a correlated reference, in an enclosing scope."""
    current: Scope | None = scope
    while current is not None:
        source = current.sources.get(alias)
        if source is not None:
            return source
        current = current.parent
    return None
