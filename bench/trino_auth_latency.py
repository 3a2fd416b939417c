"""What Trino's authentication costs a query: HTTPS + JWT (a tenant's token from ``/oauth/token``) against the plain,
unauthenticated HTTP protocol, in the same run, on the same lake.

The secured Trino is the stack's (HTTPS only, ``settings.trino``); for the plain reference the bench starts a second
Trino with the stack's own code (``ops/stack/services/trino.py``, ``trino.https=false``) on ``--plain-port``, over the
same lake, file metastore and access rules, and stops it at the end. A throw-away tenant gets a small Delta table
(delta-rs) registered in its schema, its rules (``AccessSync``) and an API client whose token Trino checks.

Two queries, each run ``--queries`` times per mode, the modes interleaved (so drift hits both alike):

- ``select1``: ``SELECT 1``;
- ``tenant``: a query of the tenant's table as the tenant's user (a masked column: the rules' masks apply).

Each in two client shapes: ``reused`` (one connection per mode, kept alive: a BI tool's pool) and ``fresh`` (a new
connection per query: TLS handshake and authentication included). Medians (ms) and the ratio secured / plain.

    .stack/venv/bin/metalake stack up            # Trino (HTTPS) and the API it trusts
    .stack/venv/bin/python bench/trino_auth_latency.py --queries 100
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import shutil
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import trino
from arro3.core import Array, DataType, Field, Schema, Table
from deltalake import write_deltalake
from pymongo import MongoClient

from control.auth.clients import ClientStore, Role
from metalake.settings import load_settings
from metalake.trino_admin import admin_cursor
from metalake.trino_connect import connect
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.paths import find_project_root, use_checkout_stack
from tenants.access.sync import AccessSync
from tenants.naming import CONTROL_DATABASE, names_for, trino_user
from tenants.trino_schemas import trino_schema


def _literal(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def make_tenant_table(settings: Settings, tenant: str) -> str:
    """A two-column Delta table in the tenant's lake folder, registered in its Trino schema; its qualified name."""
    names = names_for(tenant, settings.lake_root)
    path = names.lake_dir / "people"
    path.mkdir(parents=True, exist_ok=True)
    schema = Schema([Field("id", DataType.int64(), nullable=True), Field("email", DataType.string(), nullable=True)])
    ids = list(range(1000))
    arrays = [Array(ids, DataType.int64()), Array([f"u{i}@example.org" for i in ids], DataType.string())]
    write_deltalake(str(path), Table.from_arrays(arrays, schema=schema), mode="overwrite")
    location = "local:///" + str(names.lake_dir.relative_to(settings.lake_root))
    schema = trino_schema(settings, tenant)
    with admin_cursor(settings) as cur:
        cur.execute(f'CREATE SCHEMA IF NOT EXISTS lake."{schema}" WITH (location = {_literal(location)})')
        cur.fetchall()
        cur.execute(
            f"CALL lake.system.register_table(schema_name => {_literal(trino_schema(settings, tenant))}, "
            f"table_name => 'people', table_location => {_literal(location + '/people')})"
        )
        cur.fetchall()
    return f'lake."{trino_schema(settings, tenant)}".people'


def drop_tenant(settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str) -> None:
    """Unregister the table and drop the schema (the lake folder and the tenant's database go too)."""
    names = names_for(tenant, settings.lake_root)
    schema = _literal(trino_schema(settings, tenant))
    with admin_cursor(settings) as cur:
        cur.execute(f"CALL lake.system.unregister_table(schema_name => {schema}, table_name => 'people')")
        cur.fetchall()
        cur.execute(f'DROP SCHEMA IF EXISTS lake."{trino_schema(settings, tenant)}"')
        cur.fetchall()
    shutil.rmtree(names.lake_dir, ignore_errors=True)
    mongo.drop_database(names.mongo_database)
    AccessSync(settings, mongo).sync()


def tag_pii(settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str) -> None:
    """``email`` PII-tagged (as the projection writes a classification), so the tenant's user reads it masked."""
    names = names_for(tenant, settings.lake_root)
    urn = f"urn:metalake:trino:{settings.access.trino_instance}/lake/{trino_schema(settings, tenant)}/people/email"
    doc = {"urn": urn, "tag": "PII", "source": "human", "deleted": False, "version": 1, "event_id": "bench"}
    mongo[names.mongo_database]["classifications"].update_one({"_id": f"{urn}|PII"}, {"$set": doc}, upsert=True)
    AccessSync(settings, mongo).sync([tenant])


def tenant_token(settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str) -> str:
    """A token from the API's ``/oauth/token`` for a fresh read-only client of the tenant."""
    record, secret = ClientStore(mongo[CONTROL_DATABASE]).create(tenant, Role.READ_ONLY, "bench-trino-auth")
    answer = httpx.post(
        f"{settings.api.issuer_url}/oauth/token",
        data={"grant_type": "client_credentials"},
        auth=(record.client_id, secret),
        timeout=10,
    )
    answer.raise_for_status()
    return str(answer.json()["access_token"])


@contextmanager
def plain_trino(settings: Settings, port: int, work: Path) -> Iterator[Settings]:
    """A second Trino on plain HTTP (no authentication) over the same lake and rules, started with the stack's code;
    stopped on exit. Its folders are under ``work``; its server comes from the stack's cache (a link)."""
    plain = settings.model_copy(deep=True)
    plain.trino.https = False
    plain.trino.host, plain.trino.port = settings.stack.host, port
    plain.stack.ports.trino = port
    plain.stack.dir = work
    work.mkdir(parents=True, exist_ok=True)
    cache = work / "cache"
    if not cache.exists():
        cache.symlink_to(settings.local_stack_dir / "cache")
    manager = StackManager(plain, find_project_root(), echo=lambda line: print(f"[plain trino] {line}", flush=True))
    manager.up(["trino"])
    try:
        yield plain
    finally:
        manager.down(["trino"])


def timed(fn: Callable[..., object], *args: Any) -> float:
    started = time.perf_counter()
    fn(*args)
    return (time.perf_counter() - started) * 1000


def query(conn: Any, sql: str) -> list[Any]:
    cur = conn.cursor()
    cur.execute(sql)
    rows: list[Any] = cur.fetchall()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--queries", type=int, default=100, help="runs per query, mode and client shape")
    parser.add_argument("--warmup", type=int, default=10, help="untimed runs per query and mode first")
    parser.add_argument(
        "--plain-port", type=int, default=None, help="port of the plain-HTTP reference Trino (default: Trino's + 1)"
    )
    parser.add_argument("--plain-dir", default=None, help="work folder of the plain Trino (default: under the stack)")
    args = parser.parse_args()

    use_checkout_stack()
    settings = load_settings(Settings)
    if not settings.trino.https:
        raise SystemExit("trino.https is off: the bench compares the stack's HTTPS Trino with a plain one")
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri)
    tenant = f"bench-{secrets.token_hex(3)}"
    work = Path(args.plain_dir) if args.plain_dir else settings.local_stack_dir / "run" / "bench-plain-trino"
    table = make_tenant_table(settings, tenant)
    try:
        tag_pii(settings, mongo, tenant)
        token = tenant_token(settings, mongo, tenant)
        user = trino_user(tenant)
        tenant_sql = f"SELECT count(*), max(email) FROM {table} WHERE id % 7 = 0"  # noqa: S608 - a generated name
        plain_port = args.plain_port or settings.stack.ports.trino + 1
        with plain_trino(settings, plain_port, work) as plain:
            modes: dict[str, Callable[[], Any]] = {
                "https_jwt": lambda: connect(settings, token=token),
                "plain_http": lambda: connect(plain, session_user=user),
            }
            # Both read the same table through the same rules: the mask applies on both.
            for name, make in modes.items():
                rows = query(make(), tenant_sql)
                assert rows[0][1] == "****", (name, rows)
            results = measure(modes, {"select1": "SELECT 1", "tenant": tenant_sql}, args.queries, args.warmup)
    finally:
        drop_tenant(settings, mongo, tenant)
        mongo.close()
    report = {
        "bench": "trino_auth_latency",
        "queries": args.queries,
        "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()},
        "median_ms": results,
        "ratio_https_jwt_over_plain": {
            key: round(v["https_jwt"] / v["plain_http"], 2) for key, v in results.items() if v["plain_http"] > 0
        },
    }
    print(json.dumps(report, indent=1))


def measure(
    modes: dict[str, Callable[[], Any]], queries: dict[str, str], n: int, warmup: int
) -> dict[str, dict[str, float]]:
    """Medians (ms) per ``<query>_<shape>`` and mode; the modes alternate run by run."""
    samples: dict[str, dict[str, list[float]]] = {}
    pooled = {name: make() for name, make in modes.items()}
    try:
        for qname, sql in queries.items():
            for _ in range(warmup):
                for name in modes:
                    query(pooled[name], sql)
            for i in range(n):
                # Alternate which mode goes first, so neither always runs on a warmer machine.
                order = list(modes) if i % 2 == 0 else list(reversed(modes))
                for name in order:
                    reused = timed(query, pooled[name], sql)
                    samples.setdefault(f"{qname}_reused", {}).setdefault(name, []).append(reused)
                    fresh = timed(_once, modes[name], sql)
                    samples.setdefault(f"{qname}_fresh", {}).setdefault(name, []).append(fresh)
    finally:
        for conn in pooled.values():
            conn.close()
    return {k: {m: round(statistics.median(v), 2) for m, v in per.items()} for k, per in samples.items()}


def _once(make: Callable[[], Any], sql: str) -> None:
    conn = make()
    try:
        query(conn, sql)
    finally:
        conn.close()


if __name__ == "__main__":
    try:
        main()
    except trino.exceptions.HttpError as exc:
        raise SystemExit(f"Trino refused the bench: {exc}") from None
