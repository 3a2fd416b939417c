"""``metalake demo``: publish a small catalog (and one invalid record), then show it in Delta, MongoDB and Trino."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import trino
from pymongo import MongoClient

from metalake.events import CloudEvent, new_event, spec_for
from metalake.kafka import EventProducer, PublishError
from metalake.settings import Settings
from metalake.urn import asset_urn
from tenants.naming import names_for

Echo = Callable[[str], None]
SOURCE = "/connectors/demo"


class DemoError(RuntimeError):
    pass


def demo_events(tenant: str, version: int) -> list[CloudEvent]:
    db = ("postgres", "shop-prod", "shop")
    table = asset_urn(*db, "public", "orders")

    def upsert(urn: str, kind: str, name: str, **extra: Any) -> CloudEvent:
        data = {"urn": urn, "version": version, "kind": kind, "name": name, **extra}
        return new_event("io.metalake.asset.upserted.v1", tenant, data, source=SOURCE)

    return [
        upsert(asset_urn(*db), "database", "shop"),
        upsert(asset_urn(*db, "public"), "schema", "public"),
        upsert(table, "table", "orders", description="One row per order", owners=["data-eng@acme.example"]),
        upsert(f"{table}/id", "column", "id", data_type="bigint"),
        upsert(f"{table}/customer_email", "column", "customer_email", data_type="text"),
    ]


def _invalid_record(tenant: str) -> tuple[str, str, bytes, bytes, list[tuple[str, bytes]]]:
    # A well-formed envelope whose data lacks the required `version`: it must land in the tenant's _dlq table.
    headers = [
        ("content-type", b"application/json"),
        ("ce_specversion", b"1.0"),
        ("ce_id", f"demo-invalid-{time.time_ns()}".encode()),
        ("ce_source", SOURCE.encode()),
        ("ce_type", b"io.metalake.asset.upserted.v1"),
        ("ce_tenantid", tenant.encode()),
    ]
    value = b'{"urn": "urn:metalake:postgres:shop-prod/shop/public/broken", "kind": "table", "name": "broken"}'
    return ("metalake.events.priority", "demo-invalid", f"{tenant}:broken".encode(), value, headers)


def _wait(what: str, check: Callable[[], bool], timeout_s: float, echo: Echo) -> float:
    started = time.monotonic()
    while time.monotonic() - started < timeout_s:
        if check():
            elapsed = time.monotonic() - started
            echo(f"  {what}: visible after {elapsed:.1f}s")
            return elapsed
        time.sleep(0.25)
    raise DemoError(
        f"{what}: not visible after {timeout_s:.0f}s. Is the streaming job running? "
        "Check: metalake stack status; metalake stack logs stream"
    )


def run_demo(settings: Settings, tenant: str, *, timeout_s: float, echo: Echo) -> None:
    names = names_for(tenant, settings.lake_root)
    version = time.time_ns() // 1000
    events = demo_events(tenant, version)
    echo(f"Publishing {len(events)} events and 1 invalid record for tenant {tenant!r} (version {version})")
    try:
        with EventProducer(settings) as producer:
            deliveries = producer.publish(events, lambda e: names.topic(spec_for(e.type).topic_class(e.data)))
            producer.publish_raw([_invalid_record(tenant)])
    except PublishError as exc:
        raise DemoError(f"Kafka did not confirm the events: {exc}. Is the stack up? (metalake stack up)") from exc
    for d, e in zip(deliveries, events, strict=True):
        echo(f"  {e.data['kind']:8} {e.data['urn']}  -> {d.topic}[{d.partition}]@{d.offset}")

    table_urn = events[2].data["urn"]
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, serverSelectionTimeoutMS=5000)
    assets = mongo[names.mongo_database]["assets"]
    echo("Waiting for the streaming job:")
    _wait(
        "MongoDB",
        lambda: assets.count_documents({"version": version}) == len(events),
        timeout_s,
        echo,
    )
    conn = trino.dbapi.connect(
        host=settings.trino.host, port=settings.trino.port, user=settings.trino.user, catalog=settings.trino.catalog
    )
    cur = conn.cursor()
    # S608 below: the only identifiers put into SQL are the schema, from the validated tenant id, and fixed tables.
    schema = names.trino_schema

    def in_trino() -> bool:
        try:
            cur.execute(f'SELECT count(*) FROM "{schema}".assets WHERE version = ?', [version])  # noqa: S608
            return bool(cur.fetchone()[0] == len(events))
        except trino.exceptions.TrinoUserError:
            return False  # schema or table not registered yet

    _wait("Trino", in_trino, timeout_s, echo)

    echo(f"\nMongoDB {names.mongo_database}.assets, the table document:")
    doc = assets.find_one({"_id": table_urn}) or {}
    for key in ("_id", "kind", "name", "qualified_name", "description", "owners", "version"):
        echo(f"  {key:15} {doc.get(key)}")

    # Shown to the reader, not executed.
    echo(f'\nTrino: SELECT kind, qualified_name, data_type FROM lake."{schema}".assets WHERE version = {version}')  # noqa: S608
    cur.execute(
        f'SELECT kind, qualified_name, data_type FROM "{schema}".assets WHERE version = ? ORDER BY qualified_name',  # noqa: S608
        [version],
    )
    for kind, qname, dtype in cur.fetchall():
        echo(f"  {kind:8} {qname:35} {dtype or ''}")

    echo(f"\nDelta tables under {names.lake_dir} (read through Trino):")
    for table in ("events", "assets", "_dlq"):
        cur.execute(f'SELECT count(*) FROM "{schema}"."{table}"')  # noqa: S608
        rows = cur.fetchone()[0]
        cur.execute(f'SELECT max(version) FROM "{schema}"."{table}$history"')  # noqa: S608
        commits = cur.fetchone()[0]
        echo(f"  {table:8} {rows:6} rows, Delta version {commits}")
    cur.execute(f'SELECT reason FROM "{schema}"."_dlq" ORDER BY ingested_at DESC LIMIT 1')  # noqa: S608
    echo(f"  newest dead letter: {cur.fetchone()[0]}")
    conn.close()
    mongo.close()
    echo("\nDone. Explore: metalake stack status | metalake stack logs stream | metalake stack down")
