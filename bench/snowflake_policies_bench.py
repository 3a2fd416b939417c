"""Time to generate a tenant's Snowflake masking script for ~5,000 PII-tagged columns.

A fresh tenant's projection in the stack's MongoDB (FerretDB) gets ``--columns`` column assets of one Snowflake
account (``--tables`` tables, types cycling over VARCHAR, NUMBER(10,2), DATE, TIMESTAMP_NTZ, VARIANT), each tagged PII:
half directly (``classifications``), half along lineage (``propagated_tags``); plus ``--withdrawn`` columns whose
tag is a tombstone (to be unset). ``--mode tables`` tags the tables instead (a table tag masks all its columns;
a table is withdrawn when its first column is past ``--columns``). Written straight into MongoDB (setup, not timed),
dropped at the end.

Measured, each a median of ``--repeat`` runs:
- build: ``control.snowflake.masking.build_script`` on the columns in memory (the pure renderer);
- read: ``control.snowflake.inventory.load_inventory`` (the projection queries);
- total: ``control.snowflake.policies.snowflake_script``, what the API route and the CLI run (read + build);
plus the script's size and statement count. Prints one JSON document.

    .stack/venv/bin/python bench/snowflake_policies_bench.py --columns 5000
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import statistics
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from ops.stack.paths import use_checkout_stack  # noqa: E402

ACCOUNT = "bench12345"
TYPES = ("VARCHAR(256)", "NUMBER(10,2)", "DATE", "TIMESTAMP_NTZ(9)", "VARIANT")
NOW = datetime(2026, 11, 27, tzinfo=UTC)


def _median_s(run: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = run()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def _meta(urn: str, n: int, deleted: bool = False) -> dict[str, Any]:
    return {"deleted": deleted, "version": 1, "event_id": f"bench-{n}", "event_time": NOW, "updated_at": NOW}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--columns", type=int, default=5000)
    parser.add_argument("--tables", type=int, default=250)
    parser.add_argument("--withdrawn", type=int, default=500)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--mode",
        choices=("columns", "tables"),
        default="columns",
        help="tag each column (default), or tag whole tables (every catalogued column of a tagged table is masked)",
    )
    args = parser.parse_args()
    use_checkout_stack()

    from pymongo import MongoClient

    from catalog.projection import ASSETS_COLLECTION, CLASSIFICATIONS_COLLECTION, PROPAGATED_COLLECTION
    from control.snowflake.inventory import load_inventory
    from control.snowflake.masking import build_script
    from control.snowflake.policies import options_from, snowflake_script
    from metalake.settings import load_settings
    from metalake.urn import asset_urn
    from ops.settings import Settings
    from tenants.naming import names_for

    settings = load_settings(Settings)
    tenant = f"bench-sf-{secrets.token_hex(4)}"
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    db = client[names_for(tenant, settings.lake_root).mongo_database]
    total = args.columns + args.withdrawn
    per_table = max(1, -(-total // args.tables))
    assets, tags, propagated = [], [], []
    for n in range(total):
        urn = asset_urn("snowflake", ACCOUNT, "SHOP", "PUBLIC", f"T{n // per_table:04d}", f"C{n % per_table:03d}")
        assets.append({"_id": urn, "urn": urn, "kind": "column", "data_type": TYPES[n % len(TYPES)], **_meta(urn, n)})
        withdrawn = n >= args.columns
        if args.mode == "tables":
            # The table's tag, once per table (its first column decides live or withdrawn).
            if n % per_table == 0:
                table = urn.rsplit("/", 1)[0]
                tags.append({"_id": f"{table}|PII", "urn": table, "tag": "PII", **_meta(table, n, deleted=withdrawn)})
            continue
        if n % 2 == 0 or withdrawn:
            tags.append({"_id": f"{urn}|PII", "urn": urn, "tag": "PII", **_meta(urn, n, deleted=withdrawn)})
        else:
            origin = asset_urn("postgres", "prod", "shop", "public", "users", f"c{n}")
            doc = {"_id": f"{urn}|PII|{origin}", "urn": urn, "tag": "PII", "origin": origin, "path": [origin]}
            propagated.append({**doc, "depth": 1, **_meta(urn, n)})
    try:
        db[ASSETS_COLLECTION].insert_many(assets)
        db[CLASSIFICATIONS_COLLECTION].insert_many(tags)
        if propagated:
            db[PROPAGATED_COLLECTION].insert_many(propagated)
        options = options_from(settings.snowflake, roles=["PII_READER"])
        patterns = tuple(settings.access.pii_tags)
        limit = settings.snowflake.max_columns
        read_s, inventory = _median_s(lambda: load_inventory(db, patterns=patterns, max_columns=limit), args.repeat)
        build_s, script = _median_s(
            lambda: build_script(tenant, inventory.masked, inventory.unmasked, options, pii_tags=patterns), args.repeat
        )
        total_s, served = _median_s(lambda: snowflake_script(settings, client, tenant, options), args.repeat)
        assert served.sql == script.sql
        masked = args.columns
        if args.mode == "tables":  # whole tables: the last live one may hold columns past --columns
            masked = min(total, -(-args.columns // per_table) * per_table)
        assert (script.masked, script.unset) == (masked, total - masked), (script.masked, script.unset)
        print(
            json.dumps(
                {
                    "mode": args.mode,
                    "columns_masked": script.masked,
                    "columns_unset": script.unset,
                    "policies": script.policies,
                    "statements": script.sql.count(";\n"),
                    "script_bytes": len(script.sql.encode()),
                    "build_s": round(build_s, 4),
                    "read_s": round(read_s, 4),
                    "total_s": round(total_s, 4),
                    "repeat": args.repeat,
                    "machine": f"{platform.machine()}, {platform.python_version()}",
                },
                indent=1,
            )
        )
    finally:
        client.drop_database(db.name)
        client.close()


if __name__ == "__main__":
    main()
