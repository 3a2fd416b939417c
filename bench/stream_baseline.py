"""The baselines of bench/stream_bench.py: the floor under the job, with confluent-kafka, delta-rs (``deltalake``) and
pymongo, the way kafka-delta-ingest works.

Loop: consume a batch (up to ``--max-records`` or ``--latency`` seconds after its first record), parse and validate
every record with the job's own parser (``processors.enrichment.parse.parse_record``: headers, CloudEvents
attributes, JSON Schema of the data), group the valid events by tenant, write the tenants of the batch in parallel
(``--workers`` threads), then commit the Kafka offsets synchronously. Prints one JSON line per batch. One store per
process (``--store``), as the job has one query per store:

- ``delta``: one ``write_deltalake(mode="append")`` commit per tenant's own ``events`` table carrying a ``txn``
  action per Kafka partition (app id ``<group>-<partition>``, version = last offset, as kafka-delta-ingest records its
  progress);
- ``mongo``: the job's guarded upserts of the assets (``processors.enrichment.projection``: the newest (version,
  event id) wins), nothing else; with the job's projection trigger as its window (``--latency 0.1``) it is the floor
  of the projection queries, which write MongoDB without waiting for Delta.

Unlike the job (since issue 10: one shared table per kind for all pooled tenants, one commit per table and batch),
the Delta baseline keeps a table per tenant, so its commits per batch grow with the tenants of the batch. Neither
baseline MERGEs the state tables (assets, lineage, ...), computes health, publishes change events, writes the dead
letters (they are only counted), creates or evolves tables beyond the first append, or registers anything in Trino
(the benchmark registers the first tenant's ``events`` table, the one its freshness probes query).

    .stack/venv/bin/python bench/stream_baseline.py --topic T --group G [--store mongo --latency 0.1]
"""

from __future__ import annotations

import argparse
import json
import signal
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from types import FrameType
from typing import Any

import pyarrow as pa
from confluent_kafka import Consumer, Message
from deltalake import CommitProperties, Transaction, write_deltalake
from pymongo import MongoClient

from metalake.kafka.config import consumer_config
from ops.settings import Settings, get_settings
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


# A tenant's rows of one batch -> (seconds spent, rows written).
TenantWriter = Callable[[str, list[ParsedRow]], float]


def delta_writer(settings: Settings, group: str, now: datetime) -> TenantWriter:
    """One append per tenant's own ``events`` table, with its Kafka progress as ``txn`` actions."""

    def write(tenant: str, rows: list[ParsedRow]) -> float:
        last: dict[int, int] = {}
        for r in rows:
            last[r.partition] = max(last.get(r.partition, -1), r.offset)
        t = time.monotonic()
        write_deltalake(
            str(names_for(tenant, settings.lake_root).delta_path("events")),
            events_table(rows, now),
            mode="append",
            partition_by=["event_date"],
            commit_properties=CommitProperties(
                app_transactions=[Transaction(f"{group}-{p}", o) for p, o in sorted(last.items())]
            ),
        )
        return time.monotonic() - t

    return write


def mongo_writer(settings: Settings, mongo: MongoClient[dict[str, Any]], now: datetime) -> TenantWriter:
    """The job's guarded upserts of a tenant's assets into its database."""

    def write(tenant: str, rows: list[ParsedRow]) -> float:
        t = time.monotonic()
        collection = mongo[names_for(tenant, settings.lake_root).mongo_database][ASSETS.collection]
        apply_upserts(collection, map(spec_upsert(ASSETS), fold(ASSETS, rows, now)))
        return time.monotonic() - t

    return write


def by_tenant(batch: Sequence[Message]) -> tuple[dict[str, list[ParsedRow]], int]:
    """The batch's valid rows grouped by tenant, and the count of the others."""
    groups: dict[str, list[ParsedRow]] = {}
    invalid = 0
    for row in map(parse, batch):
        if row.valid and row.tenant:
            groups.setdefault(row.tenant, []).append(row)
        else:
            invalid += 1
    return groups, invalid


def run_batch(
    batch: Sequence[Message], writer: Callable[[datetime], TenantWriter], pool: ThreadPoolExecutor
) -> dict[str, Any]:
    """Parse, write every tenant of the batch in parallel, then print the batch's line (offsets: the caller's)."""
    started = time.monotonic()
    groups, invalid = by_tenant(batch)
    parsed = time.monotonic()
    write = writer(datetime.now(UTC))
    tenants = sorted(groups)
    spent = list(pool.map(lambda tenant: write(tenant, groups[tenant]), tenants))
    line = {
        "event": "baseline.batch_done",
        "records": len(batch),
        "invalid": invalid,
        "tenants": len(groups),
        "steps": {"parse": round(parsed - started, 4), "write": round(time.monotonic() - parsed, 4)},
        "commits": [
            {"tenant": t, "rows": len(groups[t]), "seconds": round(s, 4)} for t, s in zip(tenants, spent, strict=True)
        ],
    }
    return line


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True, help="consumer group; also the txn app id prefix")
    parser.add_argument("--store", choices=("delta", "mongo"), default="delta", help="what each batch is written to")
    parser.add_argument(
        "--max-records", type=int, default=20_000, help="batch size cap (the job's maxOffsetsPerTrigger)"
    )
    parser.add_argument("--latency", type=float, default=1.0, help="seconds a batch may wait after its first record")
    parser.add_argument(
        "--workers", type=int, default=4, help="tenants of a batch written at once (the job's projection_workers)"
    )
    return parser.parse_args(argv)


def main() -> None:
    args = parse_args()
    settings = get_settings()
    consumer = Consumer(
        consumer_config(settings, args.group, **{"enable.auto.commit": False, "auto.offset.reset": "earliest"})
    )
    consumer.subscribe([args.topic])
    mongo: MongoClient[dict[str, Any]] | None = MongoClient(settings.mongo_uri) if args.store == "mongo" else None

    def writer(now: datetime) -> TenantWriter:
        return delta_writer(settings, args.group, now) if mongo is None else mongo_writer(settings, mongo, now)

    stop: list[bool] = []

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.append(True)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    print(json.dumps({"event": "baseline.ready"}), flush=True)
    with ThreadPoolExecutor(max_workers=args.workers) as pool:
        while not stop:
            batch = consume_batch(consumer, args.max_records, args.latency, stop)
            if not batch:
                continue
            started = time.monotonic()
            line = run_batch(batch, writer, pool)
            t = time.monotonic()
            consumer.commit(asynchronous=False)
            line["steps"]["offsets"] = round(time.monotonic() - t, 4)
            line["seconds"] = round(time.monotonic() - started, 4)
            print(json.dumps(line), flush=True)
    consumer.close()
    if mongo is not None:
        mongo.close()


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
