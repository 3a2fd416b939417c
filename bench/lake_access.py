"""What the lake Trino's access control costs per query and per change, with the running stack's ``access.mode``
(``rules``: every tenant in the rules file; ``opa``: a file that names no tenant, and the access processor's
decisions; docs/serving.md). Run it once per mode on the same stack and tenants, and compare.

- **per query**: ``--queries`` times, as one tenant's plain user (impersonated by the platform user, as the SQL
  endpoint runs it), ``SELECT count(*)`` of one of its views and ``SHOW SCHEMAS FROM lake`` (a listing Trino filters
  through the access control); medians and p99.
- **per change**: ``--changes`` times ``metalake access sync --tenant <t>`` in this process (``AccessSync.sync``):
  what every tag change and every provisioning's ``access`` step costs.
- ``--extra-tenants N`` first registers N more tenants directly in the control plane (state ``active``, nothing
  queued, no schema: each gets its users' rules in ``rules`` mode as a provisioned one would) and removes them at the
  end: the rules file of ``N`` more tenants without provisioning them.

    set -a; . .stack/stack.env; set +a; export METALAKE_STACK__DIR=$PWD/.stack
    .stack/venv/bin/python bench/lake_access.py --tenant <id> --queries 50 --changes 10 [--extra-tenants 9000]

Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from metalake.mongo import mongo_client
from metalake.settings import load_settings
from metalake.trino_connect import connect
from ops.settings import Settings
from tenants.access.sync import AccessSync
from tenants.naming import CONTROL_DATABASE, trino_user
from tenants.trino_schemas import trino_schema

EXTRA_PREFIX = "bench-acl-"


def _timed(runs: int, once: Callable[[], object]) -> dict[str, float]:
    seconds = []
    for _ in range(runs):
        started = time.perf_counter()
        once()
        seconds.append(time.perf_counter() - started)
    ordered = sorted(seconds)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50_ms": round(statistics.median(seconds) * 1000, 1), "p99_ms": round(p99 * 1000, 1), "runs": runs}


def _query(settings: Settings, user: str, sql: str) -> Callable[[], object]:
    def once() -> object:
        conn = connect(settings, session_user=user)
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return cur.fetchall()
        finally:
            conn.close()

    return once


def _register_extra(control: Any, count: int) -> None:
    now = datetime.now(UTC)
    docs: list[dict[str, Any]] = [
        {
            "_id": f"{EXTRA_PREFIX}{i:05d}",
            "tier": "pooled",
            "state": "active",
            "lake_root": None,
            "display_name": None,
            "settings": {},
            "steps": {},
            "error": None,
            "created_at": now,
            "updated_at": now,
            "queued_at": None,
        }
        for i in range(count)
    ]
    for start in range(0, len(docs), 1000):
        control["tenants"].insert_many(docs[start : start + 1000])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", required=True, help="an active pooled tenant of the stack (its views are read)")
    parser.add_argument("--queries", type=int, default=50)
    parser.add_argument("--changes", type=int, default=10)
    parser.add_argument("--extra-tenants", type=int, default=0)
    args = parser.parse_args()
    settings = load_settings(Settings)
    mongo: Any = mongo_client(settings)
    control = mongo[CONTROL_DATABASE]
    sync = AccessSync(settings, mongo)
    if args.extra_tenants:
        _register_extra(control, args.extra_tenants)
    try:
        sync.sync([args.tenant])
        time.sleep(2.0)  # Trino reloads the rules file every second
        user, schema = trino_user(args.tenant), trino_schema(settings, args.tenant)
        count = _query(settings, user, f'SELECT count(*) FROM lake."{schema}".assets')  # noqa: S608 - a keyed name
        listing = _query(settings, user, "SHOW SCHEMAS FROM lake")
        count(), listing()  # the first of each compiles Trino's plan cache
        result = {
            "date": datetime.now(UTC).isoformat(timespec="seconds"),
            "machine": f"{platform.node()} {os.cpu_count()} CPUs",
            "mode": settings.access.mode,
            "tenants_registered": control["tenants"].count_documents({}),
            "rules_file_bytes": settings.access_rules_file.stat().st_size,
            "select_count": _timed(args.queries, count),
            "show_schemas": _timed(args.queries, listing),
            "sync_one_tenant": _timed(args.changes, lambda: sync.sync([args.tenant])),
        }
    finally:
        if args.extra_tenants:
            control["tenants"].delete_many({"_id": {"$regex": f"^{EXTRA_PREFIX}"}})
            sync.render()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
