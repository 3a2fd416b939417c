"""Bytes per asset and per event on disk, for the cost model (ops/cost/sizing.py, docs/cost.md).

Reads, never writes: the live files of each pooled Delta table (from its ``_delta_log``: the last checkpoint, then
the commits after it; sizes and ``numRecords`` from the ``add`` actions), and ``collStats`` of every tenant's
``assets`` collection in MongoDB with at least ``--min-docs`` documents.

    .stack/venv/bin/python bench/asset_bytes.py --lake .stack/data/lake --mongo mongodb://127.0.0.1:27017/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pymongo

STATE_TABLES = ("assets", "classifications", "lineage_edges", "incidents", "propagated_tags")


def live_files(table: Path) -> dict[str, tuple[int, int]]:
    """path -> (bytes, records) of the table's live files."""
    log = table / "_delta_log"
    files: dict[str, tuple[int, int]] = {}
    checkpoints = sorted(log.glob("*.checkpoint.parquet"))
    start = -1
    if checkpoints:
        start = int(checkpoints[-1].name.split(".")[0])
        for row in pq.read_table(checkpoints[-1], columns=["add"]).to_pylist():
            if row["add"]:
                _add(files, row["add"])
    for commit in sorted(log.glob("*.json")):
        if int(commit.name.split(".")[0]) <= start:
            continue
        for line in commit.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                _add(files, action["add"])
            elif "remove" in action:
                files.pop(action["remove"]["path"], None)
    return files


def _add(files: dict[str, tuple[int, int]], add: dict[str, Any]) -> None:
    stats = json.loads(add["stats"]) if add.get("stats") else {}
    files[add["path"]] = (int(add["size"]), int(stats.get("numRecords", 0)))


def delta_report(pooled: Path) -> dict[str, dict[str, int]]:
    out = {}
    for table in sorted(p for p in pooled.iterdir() if (p / "_delta_log").is_dir()):
        files = live_files(table)
        out[table.name] = {
            "files": len(files),
            "bytes": sum(b for b, _ in files.values()),
            "rows": sum(r for _, r in files.values()),
        }
    return out


def mongo_report(uri: str, min_docs: int) -> dict[str, dict[str, int]]:
    client: pymongo.MongoClient[dict[str, Any]] = pymongo.MongoClient(uri, serverSelectionTimeoutMS=5000)
    out = {}
    for name in client.list_database_names():
        if not name.startswith("metalake_") or name == "metalake_control":
            continue
        stats = client[name].command("collStats", "assets")
        if stats.get("count", 0) >= min_docs:
            out[name] = {k: int(stats.get(k) or 0) for k in ("count", "size", "totalIndexSize")}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lake", type=Path, default=Path(".stack/data/lake"))
    parser.add_argument("--mongo", default="mongodb://127.0.0.1:27017/")
    parser.add_argument("--min-docs", type=int, default=500)
    args = parser.parse_args()
    delta = delta_report(args.lake / "_pooled")
    for name, t in delta.items():
        print(
            f"delta {name:16} files {t['files']:5} bytes {t['bytes']:11,} rows {t['rows']:9,} "
            f"bytes/row {t['bytes'] / max(t['rows'], 1):8,.0f}"
        )
    assets = delta.get("assets", {}).get("rows", 0)
    state = sum(delta[t]["bytes"] for t in STATE_TABLES if t in delta)
    events = delta.get("events", {"bytes": 0, "rows": 0})
    print(
        f"delta state tables per asset: {state / max(assets, 1):,.0f} bytes; "
        f"events per event: {events['bytes'] / max(events['rows'], 1):,.0f} bytes"
    )
    for name, c in mongo_report(args.mongo, args.min_docs).items():
        print(
            f"mongo {name:28} docs {c['count']:7,} bytes/doc {c['size'] / c['count']:7,.0f} "
            f"index bytes/doc {c['totalIndexSize'] / c['count']:7,.0f}"
        )


if __name__ == "__main__":
    main()
