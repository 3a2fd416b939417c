"""How long ``POST /v1/tenants`` takes until the tenant is ready, through the admin API in-process (Starlette's
TestClient, the caller stood in as a platform admin), on the running local stack: a pooled and a dedicated tenant,
``--runs`` each, one after the other. Reports per tier the answer's latency (the ``POST`` alone) and the time until
``GET /v1/tenants/{tenant}`` shows it ``active`` with no work queued, medians and ranges.

Before the provisioning queue (the API ran the steps as a background task, which TestClient runs before it returns)
the ``POST`` is the whole provisioning; with it (``--worker``: the lake worker's provisioning side polling in this
process, scoped to the bench's tenants, as the stack's worker would) the ``POST`` only queues and the poll waits for
the worker. Every tenant is deleted at the end (``--worker``: by the worker; else through the API, one at a time),
unless ``--keep``.

    PYTHONPATH=<tree> .stack/venv/bin/python bench/provisioning_bench.py --runs 5 [--worker] [--tiers pooled,dedicated]

Run the code before the change with ``PYTHONPATH`` on a worktree of it (no ``--worker``), the code after with
``--worker``, on the same stack (``METALAKE_PROVISIONING__ENABLED=false`` for the stack's own lake worker, so it does
not race the bench's). With ``--worker`` each tier also reports its steps' mean seconds (``step_mean_s``, from
``metalake_provisioning_step_seconds``). Prints one JSON document.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import threading
import time
from contextlib import ExitStack
from datetime import UTC, datetime
from typing import Any

os.environ.setdefault("METALAKE_API__RESUME", "false")
os.environ.setdefault("METALAKE_API__AUDIT_FLUSH_S", "0")

# The app reads the environment above when it is imported and built.
from fastapi.testclient import TestClient

from api.app import create_app
from api.auth.deps import current_principal
from control.auth.principal import Principal
from metalake.mongo import mongo_client
from metalake.settings import load_settings
from ops.settings import Settings

ADMIN = Principal(subject="bench-platform", tenant=None, scopes=frozenset({"platform:admin"}))
PREFIX = "bench-prov-"


def _ready(view: dict[str, Any]) -> bool:
    # Before the queue the view has no queued_at: active is ready.
    return view.get("state") == "active" and view.get("queued_at") is None


def _one(api: TestClient, tier: str, timeout_s: float) -> dict[str, float | str]:
    tenant = f"{PREFIX}{secrets.token_hex(4)}"
    started = time.monotonic()
    answer = api.post("/v1/tenants", json={"id": tenant, "tier": tier})
    answered = time.monotonic() - started
    if answer.status_code != 202:
        raise SystemExit(f"POST /v1/tenants answered {answer.status_code}: {answer.text}")
    while True:
        view = api.get(f"/v1/tenants/{tenant}").json()
        if _ready(view):
            break
        if view.get("error") or time.monotonic() - started > timeout_s:
            raise SystemExit(f"{tenant} not ready: {view}")
        time.sleep(0.05)
    return {"tenant": tenant, "post_s": round(answered, 3), "ready_s": round(time.monotonic() - started, 3)}


def _summary(samples: list[dict[str, float | str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"runs": samples}
    for key in ("post_s", "ready_s"):
        values = [float(s[key]) for s in samples]
        out[key] = {"median": round(statistics.median(values), 3), "min": min(values), "max": max(values)}
    return out


def _step_totals() -> dict[str, tuple[float, float]]:
    """This process's ``metalake_provisioning_step_seconds`` (the ``--worker`` runs): (sum, count) per step done."""
    from prometheus_client.parser import text_string_to_metric_families

    from metalake.telemetry.exposition import render

    totals: dict[str, list[float]] = {}
    for family in text_string_to_metric_families(render().decode()):
        for s in family.samples:
            if s.labels.get("action") != "provision" or s.labels.get("outcome") != "done":
                continue
            pair = totals.setdefault(s.labels["step"], [0.0, 0.0])
            if s.name.endswith("_sum"):
                pair[0] = float(s.value)
            elif s.name.endswith("_count"):
                pair[1] = float(s.value)
    return {step: (pair[0], pair[1]) for step, pair in totals.items()}


def _step_means(before: dict[str, tuple[float, float]]) -> dict[str, float]:
    """Mean seconds per step since ``before``: where a tenant's time to active goes."""
    out = {}
    for step, (total, count) in _step_totals().items():
        total0, count0 = before.get(step, (0.0, 0.0))
        if count > count0:
            out[step] = round((total - total0) / (count - count0), 3)
    return out


def _delete_all(api: TestClient, tenants: list[str], timeout_s: float) -> float:
    started = time.monotonic()
    for tenant in tenants:
        api.delete(f"/v1/tenants/{tenant}", params={"confirm": tenant})
    for tenant in tenants:
        while api.get(f"/v1/tenants/{tenant}").status_code != 404:
            if time.monotonic() - started > timeout_s:
                raise SystemExit(f"{tenant} not deleted after {timeout_s} s")
            time.sleep(0.5)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--tiers", default="pooled,dedicated")
    parser.add_argument("--worker", action="store_true", help="run the lake worker's provisioning in this process")
    parser.add_argument("--timeout-s", type=float, default=900.0)
    parser.add_argument("--keep", action="store_true", help="leave the tenants (a private stack about to go down)")
    args = parser.parse_args()
    settings = load_settings(Settings)
    mongo: Any = mongo_client(settings)
    result: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": f"{platform.node()} {os.cpu_count()} CPUs",
        "worker": args.worker,
    }
    created: list[str] = []
    with ExitStack() as stack:
        if args.worker:
            # Only in the code after the change.
            from metalake.telemetry.exposition import install_meter_provider
            from processors.lake.provisioning import ProvisioningWorker

            install_meter_provider()
            worker = ProvisioningWorker(settings, mongo, scope=lambda t: t.startswith(PREFIX))
            thread = threading.Thread(target=worker.run, daemon=True)
            thread.start()
            stack.callback(thread.join, 60)
            stack.callback(worker.stop.set)
        app = create_app(settings, mongo=mongo)
        app.dependency_overrides[current_principal] = lambda: ADMIN
        api = stack.enter_context(TestClient(app))
        for tier in args.tiers.split(","):
            samples, steps_before = [], _step_totals()
            for _ in range(args.runs):
                sample = _one(api, tier, args.timeout_s)
                created.append(str(sample["tenant"]))
                samples.append(sample)
            result[tier] = _summary(samples)
            if args.worker:
                result[tier]["step_mean_s"] = _step_means(steps_before)
        if not args.keep:
            result["deleted_all_s"] = round(_delete_all(api, created, args.timeout_s * len(created)), 1)
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
