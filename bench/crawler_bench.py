"""Full-crawl throughput and peak memory of the PostgreSQL catalog crawler, against its floor.

The catalog lives in the database ``bench_catalog`` (generated once, idempotently): schemas ``bench_s00``,
``bench_s01``, ... of 1,000 tables x 100 columns each, so 10,000 tables are 1,000,000 columns. ``--tables N`` crawls
the first N/1000 schemas (and generates whichever of them are missing).

Side by side in the same run, each measurement in a fresh child process (so ``ru_maxrss`` is its own peak):

- floor: a bare psycopg server-side cursor over the crawler's own column query (``COLUMNS_SQL``), only counting rows;
- crawler: ``PostgresCatalogConnector.poll({})``, a first crawl (every table changed), consuming every record.

    .stack/venv/bin/metalake stack up postgres
    .stack/venv/bin/python bench/crawler_bench.py --tables 1000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import statistics
import subprocess
import sys
import time
from collections import Counter
from datetime import UTC, datetime
from typing import Any

import psycopg

from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector
from connectors.postgres.catalog import COLUMNS_SQL
from control.connectors.plugin import ConnectorContext, SourceAccess, partition_key
from metalake.net.ssrf import AddressGuard
from metalake.settings import load_settings
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack

DATABASE = "bench_catalog"
TABLES_PER_SCHEMA = 1000
COLUMNS = 100
CHUNK = 250  # tables per transaction: PostgreSQL's lock table (64 x max_connections) bounds one transaction's DDL
COMPLETE = "bench catalog schema: complete"

_CREATE_CHUNK = """
DO $$
DECLARE i int; cols text;
BEGIN
  SELECT string_agg(format('c%s %s', lpad(j::text, 3, '0'),
           (ARRAY['integer','text','bigint','numeric(12,2)','timestamptz','boolean','varchar(64)','jsonb'])[1 + j % 8]),
         ', ' ORDER BY j)
    INTO cols FROM generate_series(1, {columns}) AS j;
  FOR i IN {first}..{last} LOOP
    EXECUTE format('CREATE TABLE %I.%I (%s)', '{schema}', 't' || lpad(i::text, 4, '0'), cols);
    IF i % 10 = 0 THEN
      EXECUTE format('COMMENT ON TABLE %I.%I IS %L', '{schema}', 't' || lpad(i::text, 4, '0'), 'table ' || i);
    END IF;
  END LOOP;
END $$
"""


def _schemas(tables: int) -> list[str]:
    return [f"bench_s{i:02d}" for i in range(-(-tables // TABLES_PER_SCHEMA))]


def _conninfo(dbname: str) -> dict[str, Any]:
    settings = load_settings(Settings)
    return {"host": "127.0.0.1", "port": settings.stack.ports.postgres, "user": "metalake", "dbname": dbname}


def ensure_catalog(tables: int) -> None:
    """Create ``bench_catalog`` and every missing schema; a schema left half-built by an interrupted run is rebuilt."""
    with psycopg.connect(**_conninfo("postgres"), autocommit=True) as admin:
        if admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", [DATABASE]).fetchone() is None:
            admin.execute(f"CREATE DATABASE {DATABASE}")
    with psycopg.connect(**_conninfo(DATABASE), autocommit=True) as conn:
        for schema in _schemas(tables):
            row = conn.execute(
                "SELECT obj_description(oid, 'pg_namespace') FROM pg_namespace WHERE nspname = %s", [schema]
            ).fetchone()
            if row is not None and row[0] == COMPLETE:
                continue
            started = time.monotonic()
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
            conn.execute(f"CREATE SCHEMA {schema}")
            for first in range(0, TABLES_PER_SCHEMA, CHUNK):
                sql = _CREATE_CHUNK.format(columns=COLUMNS, first=first, last=first + CHUNK - 1, schema=schema)
                conn.execute(sql)
            conn.execute(f"COMMENT ON SCHEMA {schema} IS '{COMPLETE}'")
            print(f"generated {schema} in {time.monotonic() - started:.1f}s", file=sys.stderr, flush=True)
        conn.execute("VACUUM ANALYZE pg_catalog.pg_attribute")


def _peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # Linux reports KiB


def worker_floor(tables: int, fetch_size: int) -> dict[str, Any]:
    started = time.perf_counter()
    count = 0
    with psycopg.connect(**_conninfo(DATABASE)) as conn:
        oids = [
            oid
            for (oid,) in conn.execute(
                "SELECT c.oid::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace "
                "WHERE n.nspname = ANY(%s) AND c.relkind IN ('r', 'p', 'v', 'm', 'f')",
                [_schemas(tables)],
            )
        ]
        with conn.cursor(name="floor") as cur:
            cur.itersize = fetch_size
            cur.execute(COLUMNS_SQL, {"oids": oids})
            for _ in cur:
                count += 1
    return {"columns": count, "seconds": time.perf_counter() - started, "peak_rss_mib": _peak_rss_mib()}


def _connector(tables: int, fetch_size: int) -> PostgresCatalogConnector:
    info = _conninfo(DATABASE)
    # A password is required by the config; the stack's trust authentication never asks for it.
    config = PostgresCatalogConfig(
        host=info["host"], port=info["port"], user=info["user"], password="unused-trust",  # noqa: S106 - placeholder
        instance="bench", sslmode="disable",  # the stack's PostgreSQL has no TLS: the explicit opt-out
        databases=[DATABASE], include_schemas=_schemas(tables), fetch_size=fetch_size,
    )  # fmt: skip
    # The stack's PostgreSQL: loopback with trust authentication, which only an explicit allowance lets a crawl reach.
    local = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]), allow_passwordless=True)
    return PostgresCatalogConnector(config, ConnectorContext("bench", "pg", access=local))


def worker_crawler(tables: int, fetch_size: int) -> dict[str, Any]:
    connector = _connector(tables, fetch_size)
    started = time.perf_counter()
    kinds: Counter[str] = Counter()
    for record in connector.poll({}):
        kinds[str(record.event.data.get("kind") or record.event.type)] += 1
    seconds = time.perf_counter() - started
    return {
        "columns": kinds["column"],
        "records": sum(kinds.values()),
        "seconds": seconds,
        "peak_rss_mib": _peak_rss_mib(),
    }


def worker_rerun(tables: int, fetch_size: int) -> dict[str, Any]:
    """A first crawl whose offsets are stored as the runtime would, then a timed rerun of the unchanged catalog."""
    connector = _connector(tables, fetch_size)
    offsets: dict[str, Any] = {}
    for record in connector.poll({}):
        offsets[partition_key(record.partition)] = record.offset
    started = time.perf_counter()
    records = sum(1 for _ in connector.poll(offsets))
    return {"records": records, "partitions": len(offsets), "seconds": time.perf_counter() - started}


def _child(mode: str, tables: int, fetch_size: int) -> dict[str, Any]:
    argv = [sys.executable, __file__, "--worker", mode, "--tables", str(tables), "--fetch-size", str(fetch_size)]
    out = subprocess.run(argv, check=True, capture_output=True, text=True).stdout
    result: dict[str, Any] = json.loads(out)
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    seconds = statistics.median(r["seconds"] for r in runs)
    return {
        "columns": runs[0]["columns"],
        "median_s": round(seconds, 2),
        "runs_s": [round(r["seconds"], 2) for r in runs],
        "columns_per_s": round(runs[0]["columns"] / seconds),
        "peak_rss_mib": round(max(r["peak_rss_mib"] for r in runs), 1),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tables", type=int, default=10_000, help="tables to crawl, 100 columns each (default 10000)")
    parser.add_argument("--runs", type=int, default=3, help="runs of each side; medians are reported (default 3)")
    parser.add_argument("--fetch-size", type=int, default=5000, help="server-side cursor batch (default 5000)")
    parser.add_argument("--rerun", action="store_true", help="also time one rerun of the unchanged catalog")
    parser.add_argument("--worker", choices=["floor", "crawler", "rerun"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker = {"floor": worker_floor, "crawler": worker_crawler, "rerun": worker_rerun}[args.worker]
        print(json.dumps(worker(args.tables, args.fetch_size)))
        return

    started = time.monotonic()
    ensure_catalog(args.tables)
    generate_s = time.monotonic() - started
    floor: list[dict[str, Any]] = []
    crawler: list[dict[str, Any]] = []
    for _ in range(args.runs):  # interleaved, so a noisy neighbour on the shared VM hits both sides alike
        floor.append(_child("floor", args.tables, args.fetch_size))
        crawler.append(_child("crawler", args.tables, args.fetch_size))
    assert crawler[0]["columns"] == floor[0]["columns"] == len(_schemas(args.tables)) * TABLES_PER_SCHEMA * COLUMNS
    result = {
        "date": datetime.now(UTC).date().isoformat(),
        "machine": f"{platform.machine()}, {platform.python_implementation()} {platform.python_version()}",
        "tables": len(_schemas(args.tables)) * TABLES_PER_SCHEMA,
        "runs": args.runs,
        "fetch_size": args.fetch_size,
        "generate_s": round(generate_s, 1),
        "floor": _summary(floor),
        "crawler": {**_summary(crawler), "records": crawler[0]["records"]},
    }
    result["ratio_to_floor"] = round(result["crawler"]["median_s"] / result["floor"]["median_s"], 1)
    if args.rerun:
        rerun = _child("rerun", args.tables, args.fetch_size)
        result["unchanged_rerun"] = {"records": rerun["records"], "seconds": round(rerun["seconds"], 2)}
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
