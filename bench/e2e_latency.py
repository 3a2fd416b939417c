"""End-to-end freshness of the walking skeleton: publish one event, time until it is visible.

Side by side, per event: a bare confluent-kafka consumer on the same topic (the transport floor), the MongoDB
projection, and Trino over the Delta table. Needs the stack and the streaming job:

    .stack/venv/bin/metalake stack up --with-job
    .stack/venv/bin/python bench/e2e_latency.py --events 20
"""

from __future__ import annotations

import argparse
import json
import platform
import secrets
import statistics
import time
from datetime import UTC, datetime
from typing import Any

import trino
from confluent_kafka import Consumer, TopicPartition
from pymongo import MongoClient

from metalake.events import new_event
from metalake.kafka import EventProducer
from metalake.kafka.config import consumer_config
from metalake.settings import load_settings
from metalake.trino_connect import connect as trino_connect
from metalake.urn import asset_urn
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from tenants.naming import names_for
from tenants.trino_schemas import trino_schema


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=20, help="events to time, one at a time (default 20)")
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds to wait for each event")
    args = parser.parse_args()

    settings = load_settings(Settings)
    tenant = f"bench-{secrets.token_hex(3)}"
    names = names_for(tenant, settings.lake_root)
    mongo: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri)
    assets = mongo[names.mongo_database]["assets"]
    conn = trino_connect(settings, user="bench")
    cur = conn.cursor()
    consumer = Consumer(consumer_config(settings, f"bench-{tenant}"))
    results: dict[str, list[float]] = {"kafka_consumer": [], "mongodb": [], "trino": []}
    with EventProducer(settings) as producer:
        for i in range(args.events + 1):  # event 0 registers the tenant's tables; it is not timed
            urn = asset_urn("bench", "local", "db", "public", f"t{i}")
            event = new_event(
                "io.metalake.asset.upserted.v1",
                tenant,
                {"urn": urn, "version": 1, "kind": "table", "name": f"t{i}"},
                source="/bench/e2e",
            )
            t0 = time.perf_counter()
            delivery = producer.publish([event], lambda e: names.priority_topic)[0]
            consumer.assign([TopicPartition(delivery.topic, delivery.partition, delivery.offset)])
            seen: dict[str, float] = {}
            deadline = t0 + args.timeout
            while len(seen) < 3 and time.perf_counter() < deadline:
                if "kafka_consumer" not in seen:
                    msg = consumer.poll(0.05)
                    if msg is not None and msg.error() is None and msg.offset() == delivery.offset:
                        seen["kafka_consumer"] = time.perf_counter() - t0
                if "mongodb" not in seen and assets.find_one({"_id": urn}, {"_id": 1}):
                    seen["mongodb"] = time.perf_counter() - t0
                if "trino" not in seen:
                    try:
                        schema = trino_schema(settings, tenant)
                        cur.execute(f'SELECT count(*) FROM "{schema}".assets WHERE urn = ?', [urn])  # noqa: S608
                        if cur.fetchone()[0]:
                            seen["trino"] = time.perf_counter() - t0
                    except trino.exceptions.TrinoUserError:
                        pass
                time.sleep(0.02)
            if len(seen) < 3:
                raise SystemExit(f"event {i} not visible everywhere after {args.timeout}s: {seen}")
            if i > 0:
                for key, value in seen.items():
                    results[key].append(value)
                print(f"event {i:3}: " + "  ".join(f"{k}={v:6.2f}s" for k, v in seen.items()), flush=True)
    summary = {
        key: {"median_s": round(statistics.median(v), 3), "p90_s": round(_pct(v, 0.9), 3), "n": len(v)}
        for key, v in results.items()
    }
    print(
        json.dumps(
            {
                "date": datetime.now(UTC).isoformat(timespec="seconds"),
                "machine": f"{platform.node()} {platform.machine()}",
                "trigger": settings.spark.trigger_interval,
                "results": summary,
                "ratio_mongodb_to_floor": round(
                    summary["mongodb"]["median_s"] / max(summary["kafka_consumer"]["median_s"], 1e-6), 1
                ),
            },
            indent=2,
        )
    )
    consumer.close()
    conn.close()
    mongo.close()


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
