"""View lineage in the crawler, on a fake catalog (see conftest.py): table and column edges from the definitions,
their removal when a view is redefined or dropped, reruns, and definitions that do not parse."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from connectors.postgres.emit import EDGE_ADDED, EDGE_REMOVED
from control.connectors.plugin import ConnectorContext, partition_key

P = "urn:metalake:postgres:prod/shop/public"
JOINED = (
    " SELECT o.id,\n    c.email,\n    (o.amount + o.tax) AS total\n   FROM (public.orders o\n"
    "     JOIN public.customers c ON ((c.id = o.customer_id)));"
)
SOURCES = [
    ("public", "customers", ["id", "email"]),
    ("public", "orders", ["id", "customer_id", "amount", "tax"]),
]


def _shop(catalog: Any) -> Any:
    db = catalog.database("shop")
    db.add_table(1, "public", "customers", [("id", "integer"), ("email", "text")])
    db.add_table(2, "public", "orders", [(c, "numeric") for c in ("id", "customer_id", "amount", "tax")])
    db.add_view(3, "public", "v_spend", ["id", "email", "total"], JOINED, SOURCES)
    return db


def _edges(records: list[Any], event_type: str = EDGE_ADDED) -> set[tuple[str, str, str | None]]:
    return {
        (r.event.data["urn"], r.event.data["upstream"], r.event.data.get("transformation"))
        for r in records
        if r.event.type == event_type
    }


def test_view_edges_at_table_and_column_level(catalog: Any, connector: PostgresCatalogConnector) -> None:
    _shop(catalog)
    records = list(connector.poll({}))
    assert _edges(records) == {
        (f"{P}/v_spend", f"{P}/customers", "view"),
        (f"{P}/v_spend", f"{P}/orders", "view"),
        (f"{P}/v_spend/id", f"{P}/orders/id", "o.id"),
        (f"{P}/v_spend/email", f"{P}/customers/email", "c.email"),
        (f"{P}/v_spend/total", f"{P}/orders/amount", "o.amount + o.tax"),
        (f"{P}/v_spend/total", f"{P}/orders/tax", "o.amount + o.tax"),
    }
    # The view's edges come after its columns, in its tail; its offset rides on the last one and records them all.
    view_key = partition_key({"database": "shop", "schema": "public", "table": "v_spend"})
    tail = [r for r in records if partition_key(r.partition) == view_key]
    assert tail[-1].event.type == EDGE_ADDED
    offset = tail[-1].offset
    assert isinstance(offset, Mapping)
    assert offset["upstreams"] == [f"{P}/customers", f"{P}/orders"]
    assert offset["column_upstreams"] == {
        "id": [f"{P}/orders/id"],
        "email": [f"{P}/customers/email"],
        "total": [f"{P}/orders/amount", f"{P}/orders/tax"],
    }


def test_rerun_emits_nothing_and_reads_no_definition(
    catalog: Any, connector: PostgresCatalogConnector, apply: Any
) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    assert list(connector.poll(offsets)) == []
    assert db.view_reads == [[3]]  # only the first crawl's changed view was read


def test_redefined_view_replaces_its_edges(catalog: Any, connector: PostgresCatalogConnector, apply: Any) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    # Same columns, now all from orders: customers and the email column edge go away.
    db.views[3] = db.views[3]._replace(
        definition=" SELECT o.id,\n    o.customer_id::text AS email,\n    o.amount AS total\n   FROM public.orders o;",
        sources=[("public", "orders", ["id", "customer_id", "amount", "tax"])],
    )
    records = list(connector.poll(offsets))
    assert _edges(records, EDGE_REMOVED) == {
        (f"{P}/v_spend", f"{P}/customers", None),
        (f"{P}/v_spend/email", f"{P}/customers/email", None),
        (f"{P}/v_spend/total", f"{P}/orders/tax", None),
    }
    assert (f"{P}/v_spend/email", f"{P}/orders/customer_id", "CAST(o.customer_id AS TEXT)") in _edges(records)
    offsets = apply(offsets, records)
    assert list(connector.poll(offsets)) == []


def test_dropped_view_removes_its_column_edges(catalog: Any, connector: PostgresCatalogConnector, apply: Any) -> None:
    db = _shop(catalog)
    offsets = apply({}, list(connector.poll({})))
    del db.tables[3], db.views[3]
    records = list(connector.poll(offsets))
    assert _edges(records, EDGE_REMOVED) == {
        (f"{P}/v_spend", f"{P}/customers", None),
        (f"{P}/v_spend", f"{P}/orders", None),
        (f"{P}/v_spend/id", f"{P}/orders/id", None),
        (f"{P}/v_spend/email", f"{P}/customers/email", None),
        (f"{P}/v_spend/total", f"{P}/orders/amount", None),
        (f"{P}/v_spend/total", f"{P}/orders/tax", None),
    }
    assert records[-1].forgets


def test_materialized_view_and_a_view_over_a_view(catalog: Any, connector: PostgresCatalogConnector) -> None:
    db = _shop(catalog)
    db.add_view(
        4, "public", "mv_top", ["email", "total"],
        " SELECT v.email,\n    v.total\n   FROM public.v_spend v\n  WHERE (v.total > (100)::numeric);",
        [("public", "v_spend", ["id", "email", "total"])], relkind="m",
    )  # fmt: skip
    edges = _edges(list(connector.poll({})))
    assert (f"{P}/mv_top", f"{P}/v_spend", "materialized view") in edges
    assert (f"{P}/mv_top/total", f"{P}/v_spend/total", "v.total") in edges


def test_unparseable_definition_keeps_table_edges_and_the_crawl_goes_on(
    catalog: Any, connector: PostgresCatalogConnector, caplog: pytest.LogCaptureFixture
) -> None:
    db = _shop(catalog)
    db.add_view(5, "public", "v_odd", ["x"], " SELECT FROM WHERE ((;", [("public", "orders", ["id"])])
    caplog.set_level(logging.INFO, logger="connectors.postgres")
    edges = _edges(list(connector.poll({})))
    assert (f"{P}/v_odd", f"{P}/orders", "view") in edges
    assert not [e for e in edges if e[0].startswith(f"{P}/v_odd/")]
    assert (f"{P}/v_spend/id", f"{P}/orders/id", "o.id") in edges  # the other view still has its column edges
    unparsed = [r for r in caplog.records if r.getMessage() == "postgres.view_unparsed"]
    assert [(r.__dict__["view"], bool(r.__dict__["reason"])) for r in unparsed] == [("v_odd", True)]
    crawled = next(r for r in caplog.records if r.getMessage() == "postgres.database_crawled")
    assert (crawled.__dict__["views_parsed"], crawled.__dict__["views_unparsed"]) == (1, 1)


def test_column_sources_outside_the_catalog_dependencies_are_dropped(
    catalog: Any, connector: PostgresCatalogConnector
) -> None:
    # pg_depend is the truth: a source the parser found but the catalog does not list gets no edge.
    db = _shop(catalog)
    db.views[3] = db.views[3]._replace(sources=[("public", "orders", ["id", "customer_id", "amount", "tax"])])
    edges = _edges(list(connector.poll({})))
    assert not [e for e in edges if "customers" in e[1]]
    assert (f"{P}/v_spend/id", f"{P}/orders/id", "o.id") in edges


def test_long_definitions_and_a_disabled_view_lineage(catalog: Any) -> None:
    _shop(catalog)
    base = {"host": "db.internal", "user": "crawler", "password": "s3cr3t-pw", "instance": "prod"}

    def edges(**kw: Any) -> set[tuple[str, str, str | None]]:
        config = PostgresCatalogConfig(**base, **kw)
        return _edges(list(PostgresCatalogConnector(config, ConnectorContext("acme", "pg")).poll({})))

    assert edges(max_view_definition_chars=20) == {
        (f"{P}/v_spend", f"{P}/customers", "view"),
        (f"{P}/v_spend", f"{P}/orders", "view"),
    }
    assert edges(view_lineage=False) == set()
