"""The soak's crawl: a database of the stack's PostgreSQL (``soak_crawl``) crawled by the PostgreSQL connector of the
first soak tenant on a schedule (every ``connect.schedule_min_interval_s``, 300 s), as an operator would configure it
through the connectors API; the bench adds a table to the database every minute, so every crawl has news to publish.
"""

from __future__ import annotations

from typing import Any

import psycopg

from ops.demo.api_client import ApiClient
from ops.settings import Settings

DATABASE = "soak_crawl"
CONNECTOR = "soak-pg"
INSTANCE = "soak-pg"
INTERVAL_S = 300


def _connect(settings: Settings, dbname: str) -> psycopg.Connection[Any]:
    return psycopg.connect(
        host="127.0.0.1", port=settings.stack.ports.postgres, user="metalake", dbname=dbname, autocommit=True
    )


def ensure_database(settings: Settings, tables: int = 20) -> None:
    with _connect(settings, "postgres") as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone() is None:
            admin.execute(f'CREATE DATABASE "{DATABASE}"')
    with _connect(settings, DATABASE) as conn:
        for i in range(tables):
            conn.execute(f"CREATE TABLE IF NOT EXISTS public.seed_{i} (id bigint PRIMARY KEY, email text, note text)")


def add_table(settings: Settings, n: int) -> None:
    with _connect(settings, DATABASE) as conn:
        conn.execute(f"CREATE TABLE IF NOT EXISTS public.grown_{n} (id bigint PRIMARY KEY, phone text)")


def configure(api: ApiClient, settings: Settings, tenant: str) -> None:
    """The connector with its schedule (created, or replaced on a reused tenant)."""
    config = {
        "host": "127.0.0.1", "port": settings.stack.ports.postgres, "user": "metalake", "password": "unused-trust",
        "instance": INSTANCE, "databases": [DATABASE],
        "sslmode": "disable",  # the stack's PostgreSQL has no TLS: the explicit opt-out from verify-full
    }  # fmt: skip
    spec = {"type": "postgres", "config": config, "schedule": {"interval_s": INTERVAL_S}}
    path = f"/v1/tenants/{tenant}/connectors"
    if api.call("POST", path, json={"name": CONNECTOR, **spec}, expect=(201, 409)).status_code == 409:
        api.call("PUT", f"{path}/{CONNECTOR}", json=spec)


def schedule(api: ApiClient, tenant: str) -> dict[str, Any]:
    """The connector's schedule as its status shows it (last run, outcome, records)."""
    status = api.json("GET", f"/v1/tenants/{tenant}/connectors/{CONNECTOR}/status")
    found: dict[str, Any] = status.get("schedule") or {}
    return found
