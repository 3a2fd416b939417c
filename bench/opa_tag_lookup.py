"""Latency of the OPA batch endpoint (``POST /v1/opa/{key}/column-masks``) for one request naming 200 columns of 20
tables, with the tag cache off (``enforcement.cache_ttl_s`` 0: every request reads MongoDB), on the MongoDB of the
settings (the local FerretDB), per code path (issue 21, item 12):

- ``main``: the tags of each table by two case-insensitive regex queries (the code of ``--main``, a checkout of main);
- ``exact``: this checkout: ``urn_keys`` looked up as the server serves best (on FerretDB one equality per table and
  tag collection, pushed down to the GIN index on ``urn_keys``);
- ``exact-in``: this checkout forced to one ``$in`` query per tag collection (what MongoDB gets).

Setup (not timed): a bench tenant's ``classifications`` and ``propagated_tags`` (every document with its
``urn_keys``, the backfill marker recorded) holding, for each of the 20 tables (spelled ``Public.People<i>`` by the
source, asked about as ``public.people<i>``), a PII tag on ``Email`` and a propagated one on ``Phone``, plus
``--filler`` tag documents of other tables (split between the two collections, the size of a tenant's catalog);
GIN indexes on ``urn_keys`` of the two tables, as deploy/local/ferretdb/indexes.sql creates them on a stack started
from this checkout; an engine. Each path runs in a child process with its checkout first on ``sys.path``, the app
in-process (``TestClient``): one warm-up request, then ``--runs`` (``--main-runs`` for main) timed ones; every
answer must name the 40 masked columns. The tenant's database and engine are removed at the end.

    PYTHONPATH=. METALAKE_STACK__DIR=/work/main/.stack .stack/venv/bin/python bench/opa_tag_lookup.py \\
        --main /work/main --filler 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
TABLES, COLUMNS_PER_TABLE = 20, 10


def _child(args: argparse.Namespace) -> None:
    """Time the endpoint with the code of ``args.checkout`` (first on sys.path); print the figures as JSON."""
    sys.path[:0] = [args.checkout, str(Path(args.checkout) / "tests" / "_support")]
    from fastapi.testclient import TestClient
    from pymongo import MongoClient

    from api.app import create_app
    from metalake.settings import load_settings
    from ops.settings import Settings
    from tests._support.tokens import api_settings

    if args.force_in:
        from catalog import urn_keys

        urn_keys.in_served_by_index = lambda database: True
    settings = api_settings(load_settings(Settings))
    settings.enforcement.cache_ttl_s = 0.0
    settings.enforcement.max_tables_per_request = TABLES
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    http = TestClient(create_app(settings, mongo=mongo))
    ref = {"catalogName": "warehouse", "schemaName": "public", "columnType": "varchar"}
    names = ("id", "email", "phone", *(f"c{i}" for i in range(COLUMNS_PER_TABLE - 3)))
    columns = [{"column": {**ref, "tableName": f"people{t}", "columnName": c}} for t in range(TABLES) for c in names]
    action = {"operation": "GetColumnMask", "filterResources": columns}
    body = {"input": {"context": {"identity": {"user": "analyst", "groups": []}}, "action": action}}
    times = []
    for i in range(args.runs + 1):
        started = time.perf_counter()
        answer = http.post(f"/v1/opa/{args.key}/column-masks", json=body)
        elapsed = time.perf_counter() - started
        masked = len(answer.json()["result"]) if answer.status_code == 200 else answer.text
        assert masked == 2 * TABLES, masked
        if i:  # the first one warms up
            times.append(elapsed * 1000)
    mongo.close()
    ordered = sorted(times)
    print(
        json.dumps(
            {
                "runs": len(times),
                "median_ms": round(statistics.median(ordered), 1),
                "min_ms": round(ordered[0], 1),
                "max_ms": round(ordered[-1], 1),
            }
        )
    )


def _seed(mongo: Any, database: str, filler: int) -> None:
    from catalog import urn_keys
    from metalake.urn import asset_urn

    def doc(urn: str, tag: str, origin: str | None) -> dict[str, Any]:
        out = {"_id": f"{urn}|{tag}" + (f"|{origin}" if origin else ""), "urn": urn, "tag": tag, "deleted": False}
        return {
            **out,
            "version": 1,
            "event_id": "e",
            **({"origin": origin} if origin else {}),
            "urn_keys": urn_keys.urn_keys(urn),
        }

    db = mongo[database]
    direct, propagated = [], []
    for t in range(TABLES):
        table = asset_urn("postgres", "Shop-Prod", "Shop", "Public", f"People{t}")
        direct.append(doc(f"{table}/Email", "PII", None))
        propagated.append(doc(f"{table}/Phone", "PII", f"{table}/Email"))
    for i in range(filler):
        urn = asset_urn("postgres", "Shop-Prod", "Shop", "Public", f"Filler{i // 10}", f"c{i % 10}")
        (direct if i % 2 else propagated).append(doc(urn, "PII", None if i % 2 else f"{urn}/up"))
    db["classifications"].insert_many(direct)
    db["propagated_tags"].insert_many(propagated)
    assert urn_keys.backfill(db) == 0


def _gin(settings: Any, database: str) -> list[str]:
    """The GIN index on ``urn_keys`` of the tenant's two tag tables, named as indexes.sql names it."""
    sys.path.insert(0, str(_ROOT / "tests" / "_support"))
    from tests._support.pgit import connect

    made = []
    with connect(settings, "ferretdb") as conn:
        rows = conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
            "WHERE n.nspname = %s AND c.relkind = 'r' AND (c.relname LIKE 'classifications%%' OR c.relname LIKE "
            "'propagated%%')",
            (database,),
        ).fetchall()
        for (table,) in rows:
            statement = conn.execute(
                "SELECT format('CREATE INDEX IF NOT EXISTS %%I ON %%I.%%I USING gin ((_jsonb->''urn_keys'')) WITH "
                "(fastupdate = off)', left(%s::text, 40) || '_' || left(md5(%s::text), 8) || '_gin_urn_keys', "
                "%s::text, %s::text)",
                (table, table, database, table),
            ).fetchone()
            conn.execute(statement[0])
            conn.execute(f'ANALYZE "{database}"."{table}"')
            made.append(table)
    return made


def _run_child(checkout: str, key: str, runs: int, force_in: bool = False) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--child", "--checkout", checkout, "--key", key, "--runs", str(runs)]
    env = {**os.environ, "PYTHONPATH": checkout}
    done = subprocess.run([*argv, *(["--force-in"] if force_in else [])], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-2000:])
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--main", help="a checkout of main (the code path before); left out: not measured")
    parser.add_argument("--filler", type=int, default=2000, help="other tables' tag documents")
    parser.add_argument("--runs", type=int, default=15)
    parser.add_argument("--main-runs", type=int, default=5)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--checkout", help=argparse.SUPPRESS)
    parser.add_argument("--key", help=argparse.SUPPRESS)
    parser.add_argument("--force-in", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        _child(args)
        return
    sys.path.insert(0, str(_ROOT))
    from pymongo import MongoClient

    from api.services.enforcement import CatalogSource, EngineStore
    from metalake.settings import load_settings
    from ops.settings import Settings
    from ops.stack.paths import use_checkout_stack
    from tenants.naming import CONTROL_DATABASE, names_for

    use_checkout_stack()  # the stack of METALAKE_STACK__DIR, else this checkout's; the children inherit it
    settings = load_settings(Settings)
    tenant = f"bench-{secrets.token_hex(4)}"
    database = names_for(tenant, settings.lake_root).mongo_database
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    store = EngineStore(mongo[CONTROL_DATABASE])
    engine, key = store.create(
        tenant, name="bench", catalogs=[CatalogSource("warehouse", "postgres", "shop-prod", "shop")]
    )
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "load_1m_before": os.getloadavg()[0],
        "tables": TABLES,
        "columns": TABLES * COLUMNS_PER_TABLE,
        "filler_documents": args.filler,
    }
    try:
        _seed(mongo, database, args.filler)
        report["gin_indexed"] = _gin(settings, database)
        secret = key.get_secret_value()
        report["exact"] = _run_child(str(_ROOT), secret, args.runs)
        report["exact-in"] = _run_child(str(_ROOT), secret, max(3, args.runs // 5), force_in=True)
        if args.main:
            report["main"] = _run_child(args.main, secret, args.main_runs)
    finally:
        store.delete(tenant, engine.engine_id)
        mongo.drop_database(database)
        mongo.close()
    report["load_1m_after"] = os.getloadavg()[0]
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
