"""The baseline of bench/stream_bench.py: confluent-kafka + delta-rs (``deltalake``), the way kafka-delta-ingest works.

Loop: consume a batch (up to ``--max-records`` or ``--latency`` seconds after its first record), parse and validate
every record with the job's own parser (``processors.enrichment.parse.parse_record``: headers, CloudEvents
attributes, JSON Schema of the data), group the valid events by tenant, one ``write_deltalake(mode="append")``
commit per tenant ``events`` table carrying a ``txn`` action per Kafka partition (app id ``<group>-<partition>``,
version = last offset, as kafka-delta-ingest records its progress), optionally (``--mongo``) the same guarded
MongoDB upserts of the assets the job makes, then a synchronous Kafka offset commit. Prints one JSON line per batch.

Unlike the job (since issue 10: one shared table per kind for all pooled tenants, one commit per table and batch),
it keeps a table per tenant, so its commits per batch grow with the tenants of the batch. It does not: MERGE the
state tables (assets, lineage, ...), compute health, publish change events, write the dead letters to a ``_dlq``
table (they are only counted), create or evolve tables beyond the first append, or register anything in Trino (the
benchmark registers the first tenant's ``events`` table, the one its freshness probes query).

    .stack/venv/bin/python bench/stream_baseline.py --topic T --group G [--mongo]
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, Message
from deltalake import CommitProperties, Transaction, write_deltalake
from pymongo import MongoClient

from metalake.kafka.config import consumer_config
from ops.settings import get_settings
from ops.stack.paths import use_checkout_stack
from processors.enrichment.parse import ParsedRow, parse_record
from processors.enrichment.projection import apply_upserts, spec_upsert
from processors.enrichment.state import ASSETS, fold
from tenants.naming import names_for

UTC_US = pa.timestamp("us", tz="UTC")
# The columns and types of the job's ``events`` table (processors/enrichment/tables.py EVENTS), partitioned alike.
EVENTS = pa.schema(
    [
        ("event_id", pa.string()),
        ("event_type", pa.string()),
        ("source", pa.string()),
        ("subject", pa.string()),
        ("version", pa.int64()),
        ("event_time", UTC_US),
        ("data", pa.string()),
        ("traceparent", pa.string()),
        ("kafka_topic", pa.string()),
        ("kafka_partition", pa.int32()),
        ("kafka_offset", pa.int64()),
        ("ingested_at", UTC_US),
        ("event_date", pa.date32()),
    ]
)


def events_table(rows: Sequence[ParsedRow], now: datetime) -> pa.Table:
    return pa.Table.from_pydict(
        {
            "event_id": [r.event_id for r in rows],
            "event_type": [r.event_type for r in rows],
            "source": [r.source for r in rows],
            "subject": [r.subject for r in rows],
            "version": [r.version for r in rows],
            "event_time": [r.event_time for r in rows],
            "data": [r.data for r in rows],
            "traceparent": [r.traceparent for r in rows],
            "kafka_topic": [r.topic for r in rows],
            "kafka_partition": [r.partition for r in rows],
            "kafka_offset": [r.offset for r in rows],
            "ingested_at": [now] * len(rows),
            "event_date": [r.event_time.date() if r.event_time else None for r in rows],
        },
        schema=EVENTS,
    )


def parse(msg: Message) -> ParsedRow:
    ts_type, ts_ms = msg.timestamp()
    kafka_time = datetime.fromtimestamp(ts_ms / 1000, UTC) if ts_type else None
    headers = msg.headers()  # a list of (key, value) for a consumed record; a dict only for one being produced
    return parse_record(
        msg.key(),
        msg.value(),
        list(headers.items()) if isinstance(headers, dict) else headers,
        msg.topic() or "",
        msg.partition() or 0,
        msg.offset() or 0,
        kafka_time,
    )


def consume_batch(consumer: Consumer, max_records: int, latency_s: float, stop: list[bool]) -> list[Message]:
    batch: list[Message] = []
    first = 0.0
    while not stop and len(batch) < max_records:
        wait = 0.2 if not batch else max(0.0, first + latency_s - time.monotonic())
        if batch and wait == 0.0:
            break
        got = consumer.consume(num_messages=min(1000, max_records - len(batch)), timeout=min(wait, 0.2))
        for msg in got:
            if msg.error() is not None:
                continue
            if not batch:
                first = time.monotonic()
            batch.append(msg)
    return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True, help="consumer group; also the txn app id prefix")
    parser.add_argument(
        "--max-records", type=int, default=20_000, help="batch size cap (the job's maxOffsetsPerTrigger)"
    )
    parser.add_argument("--latency", type=float, default=1.0, help="seconds a batch may wait after its first record")
    parser.add_argument("--mongo", action="store_true", help="also make the job's guarded upserts of the assets")
    args = parser.parse_args()

    settings = get_settings()
    consumer = Consumer(
        consumer_config(settings, args.group, **{"enable.auto.commit": False, "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([args.topic])
    mongo: MongoClient[dict[str, Any]] | None = MongoClient(settings.mongo_uri) if args.mongo else None
    stop: list[bool] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.append(True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(json.dumps({"event": "baseline.ready"}), flush=True)
    while not stop:
        batch = consume_batch(consumer, args.max_records, args.latency, stop)
        if not batch:
            continue
        started = time.monotonic()
        steps: dict[str, float] = {}
        commits: list[dict[str, Any]] = []
        t = time.monotonic()
        by_tenant: dict[str, list[ParsedRow]] = {}
        invalid = 0
        for row in map(parse, batch):
            if row.valid and row.tenant:
                by_tenant.setdefault(row.tenant, []).append(row)
            else:
                invalid += 1
        steps["parse"] = time.monotonic() - t
        now = datetime.now(UTC)
        for tenant in sorted(by_tenant):
            rows = by_tenant[tenant]
            names = names_for(tenant, settings.lake_root)
            last: dict[int, int] = {}
            for r in rows:
                last[r.partition] = max(last.get(r.partition, -1), r.offset)
            txns = [Transaction(f"{args.group}-{p}", o) for p, o in sorted(last.items())]
            t = time.monotonic()
            write_deltalake(
                str(names.delta_path("events")),
                events_table(rows, now),
                mode="append",
                partition_by=["event_date"],
                commit_properties=CommitProperties(app_transactions=txns),
            )
            spent = time.monotonic() - t
            steps["events"] = steps.get("events", 0.0) + spent
            commits.append({"tenant": tenant, "rows": len(rows), "seconds": round(spent, 4)})
            if mongo is not None:
                t = time.monotonic()
                collection = mongo[names.mongo_database][ASSETS.collection]
                apply_upserts(collection, map(spec_upsert(ASSETS), fold(ASSETS, rows, now)))
                steps["mongo"] = steps.get("mongo", 0.0) + time.monotonic() - t
        t = time.monotonic()
        consumer.commit(asynchronous=False)
        steps["offsets"] = time.monotonic() - t
        print(
            json.dumps(
                {
                    "event": "baseline.batch_done",
                    "records": len(batch),
                    "invalid": invalid,
                    "tenants": len(by_tenant),
                    "seconds": round(time.monotonic() - started, 4),
                    "steps": {k: round(v, 4) for k, v in steps.items()},
                    "commits": commits,
                }
            ),
            flush=True,
        )
    consumer.close()
    if mongo is not None:
        mongo.close()


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
