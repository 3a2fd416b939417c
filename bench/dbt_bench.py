"""Import throughput of the dbt connector on a synthetic project of a few thousand models.

The project is generated in memory in the shape of dbt 1.11's artifacts (manifest v12, catalog v1): ``--sources``
source tables, then ``--models`` models in layers, each reading one or two earlier relations through a CTE and a
join, with ``--columns`` columns of which some are expressions of two source columns. Timed: a first import
(``DbtConnector.records`` with no offsets: every node is new, every event is built and validated) and a rerun with
the offsets the first one left (nothing changed: fingerprints only). No Kafka, no files: the connector's own cost.

    .stack/venv/bin/python bench/dbt_bench.py --models 3000 --runs 3
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import statistics
import time
from collections import Counter
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from connectors.dbt import DbtConfig, DbtConnector
from connectors.dbt.mapping import Project
from control.connectors.plugin import ConnectorContext, SourceRecord, partition_key

MANIFEST_V12 = "https://schemas.getdbt.com/dbt/manifest/v12.json"
CATALOG_V1 = "https://schemas.getdbt.com/dbt/catalog/v1.json"
DB = "analytics"


def _columns(n: int) -> list[str]:
    return ["id", *(f"c{i:02d}" for i in range(1, n))]


def _model_sql(name: str, upstreams: list[tuple[str, str]], columns: list[str]) -> str:
    (s1, t1), *rest = upstreams
    select = ["a.id"]
    for i, col in enumerate(columns[1:], 1):
        if rest and i % 3 == 0:
            select.append(f"a.{col} + b.{col} as {col}")  # two sources
        elif i % 5 == 0:
            select.append(f"coalesce(a.{col}, 0) as {col}")
        else:
            select.append(f"a.{col}")
    body = f'with a as (select * from "{DB}"."{s1}"."{t1}")'  # noqa: S608 - generated text, never executed
    join = ""
    if rest:
        s2, t2 = rest[0]
        body += f', b as (select * from "{DB}"."{s2}"."{t2}")'  # noqa: S608
        join = " left join b on b.id = a.id"
    return f"{body}\nselect {', '.join(select)}\nfrom a{join}"


def synthetic(models: int, sources: int, columns: int, seed: int = 7) -> tuple[dict[str, Any], dict[str, Any]]:
    rng = random.Random(seed)
    cols = _columns(columns)
    nodes: dict[str, Any] = {}
    source_nodes: dict[str, Any] = {}
    catalog_nodes: dict[str, Any] = {}
    catalog_sources: dict[str, Any] = {}
    relations: list[tuple[str, str, str]] = []  # (unique_id, schema, name)

    def catalog_entry(unique_id: str, schema: str, name: str, kind: str) -> dict[str, Any]:
        return {
            "unique_id": unique_id,
            "metadata": {"database": DB, "schema": schema, "name": name, "type": kind, "owner": "dbt", "comment": None},
            "columns": {c: {"name": c, "index": i, "type": "integer" if c == "id" else "numeric", "comment": None}
                        for i, c in enumerate(cols, 1)},
            "stats": {},
        }  # fmt: skip

    for i in range(sources):
        uid, name = f"source.bench.raw.t{i:04d}", f"t{i:04d}"
        source_nodes[uid] = {
            "unique_id": uid, "resource_type": "source", "name": name, "identifier": name, "database": DB,
            "schema": "raw", "source_name": "raw", "description": f"raw table {i}", "columns": {},
            "meta": {}, "source_meta": {"owner": "ingest@example.com"}, "tags": ["raw"], "config": {},
            "package_name": "bench",
        }  # fmt: skip
        catalog_sources[uid] = catalog_entry(uid, "raw", name, "BASE TABLE")
        relations.append((uid, "raw", name))
    for i in range(models):
        uid, name, schema = f"model.bench.m{i:05d}", f"m{i:05d}", f"layer{i * 4 // models}"
        picks = [relations[rng.randrange(len(relations))] for _ in range(1 + (i % 2))]
        view = i % 4 == 0
        nodes[uid] = {
            "unique_id": uid, "resource_type": "model", "name": name, "alias": name, "database": DB,
            "schema": schema, "description": f"model {i}", "package_name": "bench",
            "config": {"materialized": "view" if view else "table", "meta": {"tier": str(i % 3)}},
            "tags": ["bench"], "meta": {"tier": str(i % 3)}, "group": None,
            "columns": {"id": {"name": "id", "description": "key", "meta": {}, "tags": []}},
            "depends_on": {"nodes": [p[0] for p in picks], "macros": []},
            "compiled_code": _model_sql(name, [(p[1], p[2]) for p in picks], cols),
            "original_file_path": f"models/{schema}/{name}.sql",
        }  # fmt: skip
        catalog_nodes[uid] = catalog_entry(uid, schema, name, "VIEW" if view else "BASE TABLE")
        relations.append((uid, schema, name))
    manifest = {
        "metadata": {"dbt_schema_version": MANIFEST_V12, "dbt_version": "1.11.16"},
        "nodes": nodes, "sources": source_nodes, "groups": {}, "macros": {},
    }  # fmt: skip
    catalog = {"metadata": {"dbt_schema_version": CATALOG_V1}, "nodes": catalog_nodes, "sources": catalog_sources}
    return manifest, catalog


def _store(offsets: dict[str, Mapping[str, Any]], records: list[SourceRecord]) -> dict[str, Mapping[str, Any]]:
    out = dict(offsets)
    for r in records:
        if isinstance(r.offset, Mapping):
            out[partition_key(r.partition)] = r.offset
    return out


def run(models: int, sources: int, columns: int) -> dict[str, Any]:
    manifest, catalog = synthetic(models, sources, columns)
    project = Project(manifest, catalog, "postgres", "wh", {})
    connector = DbtConnector(DbtConfig(manifest="m.json", instance="wh"), ConnectorContext("bench", "dbt"))
    started, cpu = time.perf_counter(), time.process_time()
    records = list(connector.records(project, {}))
    first, first_cpu = time.perf_counter() - started, time.process_time() - cpu
    kinds = Counter(str(r.event.data.get("kind") or r.event.type.split(".")[2]) for r in records)
    offsets = _store({}, records)
    started = time.perf_counter()
    rerun = list(connector.records(project, offsets))
    second = time.perf_counter() - started
    assert rerun == [], "an unchanged project emitted records"
    return {"first_s": first, "first_cpu_s": first_cpu, "rerun_s": second, "events": len(records), "kinds": dict(kinds)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", type=int, default=3000)
    parser.add_argument("--sources", type=int, default=200)
    parser.add_argument("--columns", type=int, default=12)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    results = [run(args.models, args.sources, args.columns) for _ in range(args.runs)]
    first = statistics.median(r["first_s"] for r in results)
    # CPU time too: on a shared machine the wall clock also measures the neighbours.
    first_cpu = statistics.median(r["first_cpu_s"] for r in results)
    rerun = statistics.median(r["rerun_s"] for r in results)
    events = results[0]["events"]
    print(
        json.dumps(
            {
                "bench": "dbt_import",
                "when": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": f"{platform.machine()} {platform.python_version()}",
                "models": args.models,
                "sources": args.sources,
                "columns_per_relation": args.columns,
                "runs": args.runs,
                "events": events,
                "kinds": results[0]["kinds"],
                "first_import_s": round(first, 2),
                "events_per_s": round(events / first),
                "first_import_cpu_s": round(first_cpu, 2),
                "events_per_cpu_s": round(events / first_cpu),
                "models_per_s": round(args.models / first),
                "unchanged_rerun_s": round(rerun, 2),
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
