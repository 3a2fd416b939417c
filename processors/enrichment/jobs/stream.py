"""The pooled streaming job: the event topics -> per-tenant Delta tables -> MongoDB.

Run it with ``metalake stack up --with-job`` (managed) or ``python -m processors.enrichment.jobs.stream`` (foreground).
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import FrameType

from pymongo import MongoClient

from metalake.settings import Settings, get_settings
from metalake.telemetry import configure_telemetry
from processors.enrichment.session import build_spark
from processors.enrichment.writer import AfterDeltaHook, BatchWriter
from tenants.naming import event_topics, names_for

log = logging.getLogger("processors.enrichment.jobs.stream")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m processors.enrichment.jobs.stream",
        description="Stream metalake events from Kafka into per-tenant Delta tables and the MongoDB projection.",
    )
    parser.add_argument("--ready-file", type=Path, help="Touched once the streaming query runs (for supervisors).")
    parser.add_argument("--query-name", help="Query name; also the Delta txnAppId and checkpoint folder.")
    parser.add_argument(
        "--tenant",
        help="Run the query of one dedicated tenant (its own topics and checkpoint) instead of the pooled one.",
    )
    parser.add_argument(
        "--available-now", action="store_true", help="Process what is in Kafka now, then stop (backfills, tests)."
    )
    return parser.parse_args(argv)


def _fault_hook() -> AfterDeltaHook | None:
    """Fault tests set METALAKE_FAULT_KILL_AFTER_DELTA=<batch id> to die between the Delta commit and MongoDB."""
    target = os.environ.get("METALAKE_FAULT_KILL_AFTER_DELTA")
    if not target:
        return None

    def kill(tenant: str, batch_id: int) -> None:
        if batch_id == int(target):
            log.warning("fault.kill_after_delta", extra={"batch_id": batch_id})
            os.kill(os.getpid(), signal.SIGKILL)

    return kill


def _plan(settings: Settings, args: argparse.Namespace) -> tuple[str, list[str], Path]:
    """Query name, topics and checkpoint of the pooled query or of one dedicated tenant's query."""
    if args.tenant:
        names = names_for(args.tenant, settings.lake_root, dedicated=True)
        query_name = args.query_name or f"metalake-dedicated-{args.tenant}"
        return (
            query_name,
            [names.priority_topic, names.bulk_topic],
            names.checkpoint_dir(settings.checkpoint_root, query_name),
        )
    query_name = args.query_name or settings.spark.query_name
    return query_name, list(event_topics()), settings.checkpoint_root / "_pooled" / query_name


def run(settings: Settings, args: argparse.Namespace) -> None:
    query_name, topics, checkpoint = _plan(settings, args)
    spark = build_spark(settings, query_name)
    mongo: MongoClient[dict[str, object]] = MongoClient(
        settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms
    )
    writer = BatchWriter(settings, query_name, mongo, after_delta=_fault_hook(), only_tenant=args.tenant)
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", ",".join(topics))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", settings.spark.max_offsets_per_trigger)
        .load()
    )
    stream = source.writeStream.foreachBatch(writer).queryName(query_name).option("checkpointLocation", str(checkpoint))
    stream = (
        stream.trigger(availableNow=True)
        if args.available_now
        else stream.trigger(processingTime=settings.spark.trigger_interval)
    )
    query = stream.start()
    log.info("stream.started", extra={"query": query_name, "topics": topics, "checkpoint": str(checkpoint)})
    if args.ready_file:
        args.ready_file.write_text(f"{os.getpid()} {time.time():.0f}\n")

    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Only flag it: calling into py4j from a signal handler re-enters the gateway connection.
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        while query.isActive and not stopping.is_set():
            query.awaitTermination(1)
        if stopping.is_set():
            log.info("stream.stopping")
            query.stop()
    finally:
        mongo.close()
        spark.stop()
    if query.exception() is not None:
        raise SystemExit(f"streaming query failed: {query.exception()}")


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    settings = get_settings()
    configure_telemetry(settings.telemetry, "stream")
    run(settings, args)


if __name__ == "__main__":
    main(sys.argv[1:])
