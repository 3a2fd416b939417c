"""The demo's catalog: a Postgres database with two tables, their columns and a column->column lineage edge."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from metalake.events import CloudEvent, new_event
from metalake.kafka import RawRecord
from metalake.urn import asset_urn

SOURCE = "/connectors/demo"
DB = ("postgres", "shop-prod", "shop")


@dataclass(frozen=True)
class Catalog:
    events: list[CloudEvent]
    version: int  # of every event: the source's timestamp (ms)
    customers: str  # the table URNs
    orders: str
    pii_column: str  # customers/contact: the demo tags it PII
    downstream_column: str  # orders/customer_contact: copied from customers/contact, so PII propagates to it

    @property
    def asset_count(self) -> int:
        return sum(1 for e in self.events if e.type == "io.metalake.asset.upserted.v1")


def demo_catalog(tenant: str, version: int) -> Catalog:
    customers = asset_urn(*DB, "public", "customers")
    orders = asset_urn(*DB, "public", "orders")

    def upsert(urn: str, kind: str, name: str, **extra: Any) -> CloudEvent:  # noqa: ANN401
        data = {"urn": urn, "version": version, "kind": kind, "name": name, **extra}
        return new_event("io.metalake.asset.upserted.v1", tenant, data, source=SOURCE)

    edge = {
        "urn": f"{orders}/customer_contact",
        "upstream": f"{customers}/contact",
        "version": version,
        "transformation": "orders.customer_contact is copied from customers.contact",
    }
    return Catalog(
        version=version,
        events=[
            upsert(asset_urn(*DB), "database", "shop"),
            upsert(asset_urn(*DB, "public"), "schema", "public"),
            upsert(customers, "table", "customers", description="One row per customer", owners=["crm@acme.example"]),
            upsert(f"{customers}/id", "column", "id", data_type="bigint"),
            # Names no classification rule matches (unlike `email`): the PII tag comes from the demo, through the API.
            upsert(f"{customers}/contact", "column", "contact", data_type="text"),
            upsert(orders, "table", "orders", description="One row per order", owners=["data-eng@acme.example"]),
            upsert(f"{orders}/id", "column", "id", data_type="bigint"),
            upsert(f"{orders}/customer_contact", "column", "customer_contact", data_type="text"),
            new_event("io.metalake.lineage.edge.added.v1", tenant, edge, source=SOURCE),
        ],
        customers=customers,
        orders=orders,
        pii_column=f"{customers}/contact",
        downstream_column=f"{orders}/customer_contact",
    )


def invalid_record(tenant: str, topic: str) -> RawRecord:
    """A well-formed envelope whose data lacks the required ``version``: it must land in the tenant's _dlq table."""
    headers = [
        ("content-type", b"application/json"),
        ("ce_specversion", b"1.0"),
        ("ce_id", f"demo-invalid-{time.time_ns()}".encode()),
        ("ce_source", SOURCE.encode()),
        ("ce_type", b"io.metalake.asset.upserted.v1"),
        ("ce_tenantid", tenant.encode()),
    ]
    value = b'{"urn": "urn:metalake:postgres:shop-prod/shop/public/broken", "kind": "table", "name": "broken"}'
    return RawRecord(topic, "demo-invalid", f"{tenant}:broken".encode(), value, headers)
