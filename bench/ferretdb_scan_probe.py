"""Cost of one projection statement against the size of the collection, on the MongoDB of the settings (the local
FerretDB): the guarded upsert of ``processors.enrichment.projection`` inserting a new document and updating an
existing one, and the projection's stale pre-read ``find({_id: {$in: 50 ids}})``. Uses a scratch collection that it
drops at the end; pass a database of a bench tenant (it is dropped with the tenant).

    .stack/venv/bin/python bench/ferretdb_scan_probe.py --database metalake_bench-prop-abc123
"""

from __future__ import annotations

import argparse
import json
import time
from datetime import UTC, datetime
from typing import Any

from pymongo import MongoClient

from metalake.settings import load_settings
from processors.enrichment.projection import guarded_upsert


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--database", required=True)
    parser.add_argument("--sizes", default="250,1000,2000,4000")
    parser.add_argument("--statements", type=int, default=5, help="statements per measure (mean)")
    args = parser.parse_args()
    mongo: MongoClient[dict[str, Any]] = MongoClient(load_settings().mongo_uri, tz_aware=True)
    db = mongo[args.database]
    scratch = db["bench_scan_probe"]
    scratch.drop()
    now, size, n = datetime.now(UTC), 0, args.statements
    try:
        for target in (int(s) for s in args.sizes.split(",")):
            pad = "x" * 200
            base = {"version": 1, "event_id": "a", "deleted": False, "updated_at": now, "pad": pad}
            scratch.insert_many([{**base, "_id": f"k{i}"} for i in range(size, target)])
            size = target
            new = [guarded_upsert(f"n{target}-{i}", 1, "b", {"deleted": False}) for i in range(n)]
            started = time.perf_counter()
            db.command({"update": scratch.name, "updates": new, "ordered": True})
            upsert_new = (time.perf_counter() - started) / n
            held = [guarded_upsert(f"k{i}", 2, "b", {"deleted": False}) for i in range(n)]
            started = time.perf_counter()
            db.command({"update": scratch.name, "updates": held, "ordered": True})
            upsert_held = (time.perf_counter() - started) / n
            started = time.perf_counter()
            list(scratch.find({"_id": {"$in": [f"k{i}" for i in range(50)]}}, {"version": 1}))
            find_in = time.perf_counter() - started
            plan = db.command({"explain": {"find": scratch.name, "filter": new[0]["q"]}})
            print(
                json.dumps(
                    {
                        "docs": size,
                        "upsert_new_s": round(upsert_new, 3),
                        "upsert_existing_s": round(upsert_held, 3),
                        "find_in50_s": round(find_in, 3),
                        "guard_filter_pushdown": plan.get("filterPushdown"),
                    }
                ),
                flush=True,
            )
    finally:
        scratch.drop()
        mongo.close()


if __name__ == "__main__":
    main()
