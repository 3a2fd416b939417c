"""The shared SQL lineage parser (connectors/sqllineage.py) on tricky PostgreSQL: joins, aliases, CTEs, subqueries,
set operations, expressions, stars, search_path resolution, quoted names, and what it refuses."""

from __future__ import annotations

from pathlib import Path

import pytest

from connectors.sqllineage import Lineage, SourceColumn, UnparseableSql, lineage

TABLES = {
    ("shop", "public", "orders"): ["id", "customer_id", "amount", "tax"],
    ("shop", "public", "customers"): ["id", "name", "email"],
    ("shop", "sales", "orders"): ["id", "region"],
    ("shop", "public", "MixedCase"): ["Name", "id"],
}


def _run(sql: str, search_path: tuple[str, ...] = ("public",)) -> Lineage:
    return lineage(sql, dialect="postgres", database="shop", search_path=search_path, tables=TABLES)


def _cols(result: Lineage) -> dict[str, set[str]]:
    return {c.name: {f"{s.table[1]}.{s.table[2]}.{s.column}" for s in c.sources} for c in result.columns}


def test_join_with_aliases_and_an_expression_of_two_columns() -> None:
    result = _run(
        "SELECT o.id, o.amount + o.tax AS total, c.name FROM orders o JOIN customers c ON c.id = o.customer_id"
    )
    assert result.tables == {("shop", "public", "orders"), ("shop", "public", "customers")}
    assert _cols(result) == {
        "id": {"public.orders.id"},
        "total": {"public.orders.amount", "public.orders.tax"},  # the join key is no source of a value
        "name": {"public.customers.name"},
    }
    total = result.column("total")
    assert total is not None and total.expression == "o.amount + o.tax"
    assert SourceColumn(("shop", "public", "orders"), "tax") in total.sources


def test_unqualified_columns_of_a_join_resolve_through_the_known_tables() -> None:
    result = _run("SELECT email, amount FROM orders JOIN customers ON customers.id = orders.customer_id")
    assert _cols(result) == {"email": {"public.customers.email"}, "amount": {"public.orders.amount"}}


def test_cte_aggregate_and_a_subquery_in_where_counts_as_a_table_only() -> None:
    result = _run(
        "WITH t AS (SELECT customer_id, sum(amount) AS s FROM orders GROUP BY 1) "
        "SELECT c.email, t.s AS spent FROM t JOIN public.customers c ON c.id = t.customer_id "
        "WHERE c.id IN (SELECT id FROM sales.orders)"
    )
    assert result.tables == {("shop", "public", "orders"), ("shop", "public", "customers"), ("shop", "sales", "orders")}
    assert _cols(result) == {"email": {"public.customers.email"}, "spent": {"public.orders.amount"}}


def test_cte_with_a_column_list_and_a_derived_table() -> None:
    result = _run("WITH x (a, b) AS (SELECT id, amount FROM orders) SELECT y.b FROM (SELECT b FROM x) y")
    assert _cols(result) == {"b": {"public.orders.amount"}}


def test_scalar_subquery_correlated_to_the_outer_query() -> None:
    result = _run(
        "SELECT c.id, (SELECT max(o.amount) FROM orders o WHERE o.customer_id = c.id) AS biggest FROM customers c"
    )
    assert _cols(result) == {"id": {"public.customers.id"}, "biggest": {"public.orders.amount"}}


def test_union_branches_feed_each_column_by_position() -> None:
    result = _run("SELECT id, name AS label FROM customers UNION ALL SELECT id, region FROM sales.orders")
    assert _cols(result) == {
        "id": {"public.customers.id", "sales.orders.id"},
        "label": {"public.customers.name", "sales.orders.region"},
    }


def test_star_is_expanded_from_the_known_columns_in_order() -> None:
    result = _run("SELECT * FROM customers")
    assert [c.name for c in result.columns] == ["id", "name", "email"]
    assert _cols(result)["email"] == {"public.customers.email"}


def test_search_path_picks_the_first_schema_holding_the_table() -> None:
    assert _run("SELECT id FROM orders", search_path=("sales", "public")).tables == {("shop", "sales", "orders")}
    assert _run("SELECT id FROM orders", search_path=("public", "sales")).tables == {("shop", "public", "orders")}
    # A table no schema of the path holds resolves to the first schema (where the engine would look first).
    assert _run("SELECT a.x FROM nowhere a", search_path=("sales", "public")).tables == {("shop", "sales", "nowhere")}


def test_quoted_names_keep_their_case_and_unquoted_ones_fold() -> None:
    result = _run('SELECT "Name" AS n FROM "MixedCase"')
    assert result.tables == {("shop", "public", "MixedCase")}
    assert _cols(result) == {"n": {"public.MixedCase.Name"}}
    assert _run("SELECT ID FROM ORDERS").tables == {("shop", "public", "orders")}
    # A mixed-case table named by its own name, as pg_get_viewdef writes it.
    qualified = _run('SELECT "MixedCase"."Name" AS a, "MixedCase".id FROM public."MixedCase"')
    assert _cols(qualified) == {"a": {"public.MixedCase.Name"}, "id": {"public.MixedCase.id"}}


def test_case_cast_coalesce_window_and_lateral() -> None:
    result = _run(
        "SELECT CASE WHEN o.amount > 0 THEN o.tax ELSE 0 END AS t, COALESCE(o.amount, 0)::text AS c, "
        "sum(o.amount) OVER (PARTITION BY o.customer_id) AS running, l.v "
        "FROM orders o, LATERAL (SELECT o.tax * 2 AS v) l"
    )
    assert _cols(result) == {
        "t": {"public.orders.amount", "public.orders.tax"},
        "c": {"public.orders.amount"},
        "running": {"public.orders.amount", "public.orders.customer_id"},
        "v": {"public.orders.tax"},
    }


def test_literals_count_star_and_table_functions_have_no_source() -> None:
    result = _run("SELECT count(*) AS n, 1 AS one, g FROM orders, generate_series(1, 3) g")
    assert result.tables == {("shop", "public", "orders")}
    assert _cols(result) == {"n": set(), "one": set(), "g": set()}


def test_a_view_definition_as_pg_get_viewdef_prints_it() -> None:
    # With an empty search_path PostgreSQL qualifies every relation, casts and parenthesises.
    sql = " SELECT t.id,\n    t.amount\n   FROM public.orders t\n  WHERE (t.amount > (100)::numeric);"
    result = _run(sql, search_path=("sales",))
    assert result.tables == {("shop", "public", "orders")}
    assert [c.name for c in result.columns] == ["id", "amount"]


@pytest.mark.parametrize(
    "sql",
    [
        "SELEC id FROM orders",
        "SELECT id FROM orders; SELECT 1",
        "INSERT INTO orders (id) VALUES (1)",
        "SELECT (id FROM orders",
        "",
    ],
)
def test_what_is_not_one_query_is_refused_with_a_short_reason(sql: str) -> None:
    with pytest.raises(UnparseableSql) as caught:
        _run(sql)
    assert 0 < len(caught.value.reason) <= 260


def test_a_column_a_known_table_lacks_is_refused() -> None:
    with pytest.raises(UnparseableSql, match="Unknown column"):
        _run("SELECT c.id, c.region FROM public.customers c")


def test_another_dialect_folds_names_its_own_way() -> None:
    # Snowflake folds unquoted names to upper case: the dbt connector passes its catalog's spelling.
    result = lineage(
        "with x as (select id, amount * 2 as dbl from analytics.raw.orders) "
        'select x.id, x.dbl, o.note from x join "ANALYTICS"."RAW"."ORDERS" o on o.id = x.id',
        dialect="snowflake",
        database="ANALYTICS",
        search_path=["PUBLIC"],
        tables={("ANALYTICS", "RAW", "ORDERS"): ["ID", "AMOUNT", "NOTE"]},
    )
    assert result.tables == {("ANALYTICS", "RAW", "ORDERS")}
    assert {c.name: {s.column for s in c.sources} for c in result.columns} == {
        "ID": {"ID"}, "DBL": {"AMOUNT"}, "NOTE": {"NOTE"}
    }  # fmt: skip


def test_deep_nesting_is_refused_not_a_crash() -> None:
    sql = "SELECT " + "(" * 3000 + "1" + ")" * 3000 + " AS x"
    with pytest.raises(UnparseableSql):
        _run(sql)


def test_an_empty_search_path_is_a_caller_error() -> None:
    with pytest.raises(ValueError, match="search_path"):
        lineage("SELECT 1", dialect="postgres", database="shop", search_path=())


def test_the_example_of_the_postgres_docs_runs_as_written() -> None:
    doc = (Path(__file__).resolve().parents[3] / "docs" / "connectors" / "postgres.md").read_text("utf-8")
    start = doc.index("```python\nfrom connectors.sqllineage import lineage\n")
    code = doc[start + len("```python\n") : doc.index("```", start + 10)]
    exec(compile(code, "postgres.md", "exec"), {})  # noqa: S102 - our own documentation's example
