"""PII enforced in a customer's own Trino (docs/enforcement.md): time from a tag accepted by the admin API to the
customer's Trino masking the column, and from the untag to clear, against the time to the tag being in MongoDB (what
the API serves: the baseline, the pipeline without enforcement) in the same run; plus the decision endpoint's latency
with its tag cache and without.

Setup (not timed): a scratch database on the stack's PostgreSQL (``people``: id, name, email, city, consent), the
real crawler's records published for a fresh pooled tenant, this checkout's admin API served on ``--api-port``, an
engine registered, and a second Trino 476 (``tests/_support/customer_trino.py``, the plugins deploy/local/fetch/
trino.sh keeps in ``cache/trino/extra-plugins``) on ``--trino-port`` whose ``warehouse`` catalog reads that database
with OPA access control pointed at the API.

Each round: ``POST /v1/tenants/{t}/assets/tags`` (``city``, PII) returns 202 once Kafka has the event (t0); timed until
the classification is live in MongoDB (``in_mongo``), and until an analyst's ``SELECT city`` through the customer's
Trino reads masked (``masked``); then ``DELETE .../tags`` (t0 again) until the tag is gone in MongoDB and the column
reads clear (``clear``). The probes poll every ``--poll`` seconds (their resolution). Decision latency: ``--calls``
``column-masks`` requests to the API with the engine's key (a 5-column table) with ``enforcement.cache_ttl_s`` at its
default, then at 0 (every decision reads MongoDB).

    METALAKE_STACK__DIR=.stack METALAKE_ENV_FILE=.stack/stack.env .stack/venv/bin/python bench/opa_enforcement.py
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

_ROOT = Path(__file__).resolve().parent.parent
# The harness the integration test uses (the customer Trino, the API server, tokens, the scratch database).
sys.path[:0] = [str(_ROOT), str(_ROOT / "tests" / "_support")]

import httpx  # noqa: E402
from fastapi.testclient import TestClient  # noqa: E402
from pymongo import MongoClient  # noqa: E402

from api.app import create_app  # noqa: E402
from connectors.postgres import PostgresCatalogConfig, PostgresCatalogConnector  # noqa: E402
from control.connectors.plugin import ConnectorContext, SourceAccess  # noqa: E402
from metalake.events import spec_for  # noqa: E402
from metalake.kafka import EventProducer  # noqa: E402
from metalake.net.ssrf import AddressGuard  # noqa: E402
from metalake.settings import load_settings  # noqa: E402
from metalake.urn import asset_urn  # noqa: E402
from ops.settings import Settings  # noqa: E402
from ops.stack.paths import use_checkout_stack  # noqa: E402
from tenants.naming import names_for  # noqa: E402
from tests._support.customer_trino import ApiServer, CustomerTrino  # noqa: E402
from tests._support.pgit import scratch_database  # noqa: E402
from tests._support.tokens import api_settings, auth_headers  # noqa: E402

INSTANCE = "bench-pg"
POPULATE = """
CREATE TABLE public.people (id int PRIMARY KEY, name text, email text, city text, consent boolean);
INSERT INTO public.people VALUES (1, 'Ada', 'ada@example.org', 'Oslo', true), (2, 'Cy', 'cy@example.org', 'Lima', true);
"""
SQL = "SELECT city FROM warehouse.public.people ORDER BY id"


def _until(probe: Callable[[], bool], timeout_s: float, poll_s: float) -> float:
    start = time.monotonic()
    while not probe():
        if time.monotonic() - start > timeout_s:
            raise TimeoutError
        time.sleep(poll_s)
    return time.monotonic()


def _stats(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))]
    return {"median_s": round(statistics.median(ordered), 3), "p90_s": round(p90, 3), "max_s": round(ordered[-1], 3)}


def crawl(settings: Settings, tenant: str, database: str) -> None:
    config = PostgresCatalogConfig(
        host="127.0.0.1",
        port=settings.stack.ports.postgres,
        user="metalake",
        password="unused-trust",  # noqa: S106 - the stack's PostgreSQL trusts loopback
        instance=INSTANCE,
        databases=[database],
        sslmode="disable",  # and has no TLS: the explicit opt-out from verify-full
    )
    access = SourceAccess(AddressGuard.from_settings(["127.0.0.0/8"]), allow_passwordless=True)
    records = list(PostgresCatalogConnector(config, ConnectorContext(tenant, "pg", access=access)).poll({}))

    def topic(e: Any) -> str:
        return names_for(e.tenantid, settings.lake_root).topic(spec_for(e.type).topic_class(e.data))

    with EventProducer(settings) as producer:
        producer.publish([r.event for r in records], topic)


def decision_latency(url: str, calls: int) -> dict[str, float]:
    column = {"catalogName": "warehouse", "schemaName": "public", "tableName": "people"}
    names = [("id", "integer"), ("name", "varchar"), ("email", "varchar"), ("city", "varchar"), ("consent", "boolean")]
    body = {
        "input": {
            "context": {"identity": {"user": "analyst", "groups": []}, "softwareStack": {"trinoVersion": "476"}},
            "action": {
                "operation": "GetColumnMask",
                "filterResources": [{"column": {**column, "columnName": n, "columnType": t}} for n, t in names],
            },
        }
    }
    times = []
    with httpx.Client(timeout=10) as http:
        for _ in range(calls):
            start = time.perf_counter()
            response = http.post(url, json=body)
            times.append(time.perf_counter() - start)
            response.raise_for_status()
    ordered = sorted(times)
    return {
        "median_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[int(0.9 * (len(ordered) - 1))] * 1000, 2),
    }


def run(settings: Settings, args: argparse.Namespace) -> dict[str, Any]:
    tenant = f"bench-{secrets.token_hex(4)}"
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    work = Path(tempfile.mkdtemp(prefix="opa-bench-"))
    app = create_app(api_settings(settings, issuer=f"http://127.0.0.1:{args.api_port}"), mongo=mongo)
    server = ApiServer(app, args.api_port).start()
    out: dict[str, Any] = {"tenant": tenant}
    try:
        with scratch_database(settings, POPULATE) as database:
            api = TestClient(app)
            admin = auth_headers(api, tenant=tenant, role="admin")
            mapping = {"catalog": "warehouse", "platform": "postgres", "instance": INSTANCE, "database": database}
            engine = api.post(
                f"/v1/tenants/{tenant}/engines",
                json={"name": "bench", "catalogs": [mapping], "pii_users": ["dpo"], "consent_tag": None},
                headers=admin,
            ).json()
            trino = CustomerTrino(
                settings,
                work,
                port=args.trino_port,
                database=database,
                access_control=engine["access_control_properties"],
            )
            started = time.monotonic()
            trino.start()
            try:
                crawl(settings, tenant, database)
                trino.wait_ready()
                out["customer_trino_start_s"] = round(time.monotonic() - started, 1)
                city = asset_urn("postgres", INSTANCE, database, "public", "people", "city")
                tags = f"/v1/tenants/{tenant}/assets/tags"
                live = db["classifications"]
                _until(lambda: db["assets"].find_one({"_id": city}) is not None, 300, 0.5)

                def in_mongo(present: bool) -> bool:
                    doc = live.find_one({"_id": f"{city}|PII"})
                    return (doc is not None and not doc.get("deleted")) is present

                rounds: dict[str, list[float]] = {
                    "tag_in_mongo": [],
                    "tag_masked": [],
                    "untag_in_mongo": [],
                    "untag_clear": [],
                }
                for _ in range(args.rounds):
                    t0 = time.monotonic()
                    accepted = api.post(tags, json={"urn": city, "tag": "PII"}, headers=admin)
                    assert accepted.status_code == 202, accepted.text
                    rounds["tag_in_mongo"].append(_until(lambda: in_mongo(True), 120, args.poll) - t0)
                    masked = _until(lambda: trino.query("analyst", SQL) == [["****"], ["****"]], 120, args.poll)
                    rounds["tag_masked"].append(masked - t0)
                    t0 = time.monotonic()
                    gone = api.delete(tags, params={"urn": city, "tag": "PII"}, headers=admin)
                    assert gone.status_code == 202, gone.text
                    rounds["untag_in_mongo"].append(_until(lambda: in_mongo(False), 120, args.poll) - t0)
                    clear = _until(lambda: trino.query("analyst", SQL) == [["Oslo"], ["Lima"]], 120, args.poll)
                    rounds["untag_clear"].append(clear - t0)
                    print(json.dumps({k: round(v[-1], 2) for k, v in rounds.items()}), file=sys.stderr, flush=True)
                out["rounds"] = args.rounds
                out["delays"] = {k: _stats(v) for k, v in rounds.items()}
                url = f"http://127.0.0.1:{args.api_port}/v1/opa/{engine['key']}/column-masks"
                out["decision_cached"] = decision_latency(url, args.calls)
                app.state.enforcement = None  # rebuilt with the TTL below at the next decision
                app.state.ctx.settings.enforcement.cache_ttl_s = 0.0
                out["decision_uncached"] = decision_latency(url, args.calls)
            finally:
                trino.stop()
    finally:
        server.stop()
        mongo.drop_database(names_for(tenant, settings.lake_root).mongo_database)
        mongo.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--poll", type=float, default=0.1, help="probe interval (s)")
    parser.add_argument("--calls", type=int, default=300, help="decision requests per cache setting")
    parser.add_argument("--trino-port", type=int, default=18490)
    parser.add_argument("--api-port", type=int, default=18491)
    args = parser.parse_args()
    settings = load_settings(Settings)
    report: dict[str, Any] = {
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
        "command": " ".join(sys.argv),
        "machine": {"platform": platform.platform(), "python": platform.python_version(), "cpus": os.cpu_count()},
        "cache_ttl_s": settings.enforcement.cache_ttl_s,
        **run(settings, args),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
