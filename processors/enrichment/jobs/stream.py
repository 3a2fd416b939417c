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
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

from pymongo import MongoClient
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from metalake.kafka import EventProducer
from metalake.settings import Settings, get_settings
from metalake.telemetry import configure_telemetry
from processors.enrichment.health import IncidentIndex
from processors.enrichment.session import build_spark
from processors.enrichment.writer import AfterDeltaHook, BatchWriter
from tenants.naming import TopicClass, event_topics, names_for

TOPIC_CLASSES: tuple[TopicClass, ...] = ("priority", "bulk")

log = logging.getLogger("processors.enrichment.jobs.stream")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m processors.enrichment.jobs.stream",
        description="Stream metalake events from Kafka into per-tenant Delta tables and the MongoDB projection.",
    )
    parser.add_argument("--ready-file", type=Path, help="Touched once the streaming query runs (for supervisors).")
    parser.add_argument(
        "--query-name", help="Base name of the queries (<base>-priority, <base>-bulk): Delta txnAppIds, checkpoints."
    )
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


@dataclass(frozen=True)
class QueryPlan:
    name: str
    topics: list[str]
    checkpoint: Path


def _plan(settings: Settings, args: argparse.Namespace) -> list[QueryPlan]:
    """One query per topic class, so a backlog of columns on the bulk topic never delays the priority topic.

    Pooled by default; with ``--tenant`` the dedicated tenant's own topics and checkpoints. The query name is also
    the Delta ``txnAppId``: the two queries write the same tables and must not share it.
    """
    if args.tenant:
        names = names_for(args.tenant, settings.lake_root, dedicated=True)
        base = args.query_name or f"metalake-dedicated-{args.tenant}"
        return [
            QueryPlan(f"{base}-{tc}", [names.topic(tc)], names.checkpoint_dir(settings.checkpoint_root, f"{base}-{tc}"))
            for tc in TOPIC_CLASSES
        ]
    base = args.query_name or settings.spark.query_name
    topics = dict(zip(TOPIC_CLASSES, event_topics(), strict=True))
    return [
        QueryPlan(f"{base}-{tc}", [topics[tc]], settings.checkpoint_root / "_pooled" / f"{base}-{tc}")
        for tc in TOPIC_CLASSES
    ]


def _start(
    spark: SparkSession, settings: Settings, plan: QueryPlan, writer: BatchWriter, available_now: bool
) -> StreamingQuery:
    source = (
        spark.readStream.format("kafka")
        .option("kafka.bootstrap.servers", settings.kafka_bootstrap)
        .option("subscribe", ",".join(plan.topics))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", settings.spark.max_offsets_per_trigger)
        .load()
    )
    stream = (
        source.writeStream.foreachBatch(writer).queryName(plan.name).option("checkpointLocation", str(plan.checkpoint))
    )
    if available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=settings.spark.trigger_interval)
    query = stream.start()
    log.info("stream.started", extra={"query": plan.name, "topics": plan.topics, "checkpoint": str(plan.checkpoint)})
    return query


# A failed query (Kafka or MongoDB away longer than their client timeouts, e.g. the changes publish timing out) is
# restarted from its checkpoint: the failed batch is replayed, which is safe (Delta txn ids, version-guarded MongoDB
# upserts; the changes topic is at least once). More failures than this within the window end the job as before.
MAX_RESTARTS = 5
RESTART_WINDOW_S = 600.0


def _backoff_s(failures: int) -> float:
    return float(min(60, 5 * 2 ** (failures - 1)))


class _Supervisor:
    """Runs the queries until a signal, a query stopped from outside, or (``--available-now``) all of them drained;
    restarts a failed query after a backoff, up to ``MAX_RESTARTS`` failures per ``RESTART_WINDOW_S``."""

    def __init__(self, start: Callable[[int], StreamingQuery], count: int, available_now: bool) -> None:
        self._start = start
        self._available_now = available_now
        self._failures: list[list[float]] = [[] for _ in range(count)]
        self.stopping = threading.Event()
        self.queries = [start(i) for i in range(count)]

    def _restart(self, i: int, error: object) -> bool:
        now = time.monotonic()
        recent = [t for t in self._failures[i] if now - t < RESTART_WINDOW_S] + [now]
        self._failures[i] = recent
        name = self.queries[i].name
        if len(recent) > MAX_RESTARTS:
            log.error("stream.query_failed", extra={"query": name, "failures": len(recent), "error": str(error)[:4000]})
            return False
        delay = _backoff_s(len(recent))
        log.warning(
            "stream.query_restarting",
            extra={"query": name, "failures": len(recent), "in_s": delay, "error": str(error)[:4000]},
        )
        if not self.stopping.wait(delay):
            self.queries[i] = self._start(i)
        return True

    def run(self) -> None:
        while not self.stopping.is_set():
            running = False
            for i, query in enumerate(self.queries):
                if query.isActive:
                    running = True
                    continue
                error = query.exception()
                if error is None:
                    if self._available_now:
                        continue  # drained
                    return  # stopped from outside: stop the others too
                if not self._restart(i, error):
                    return
                running = True
            if not running:
                return
            self.stopping.wait(1)


def run(settings: Settings, args: argparse.Namespace) -> None:
    plans = _plan(settings, args)
    spark = build_spark(settings, plans[0].name.rsplit("-", 1)[0])
    mongo: MongoClient[dict[str, object]] = MongoClient(
        settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms
    )
    changes = EventProducer(settings)
    tables_lock = threading.Lock()
    incident_index = IncidentIndex()
    publish_lock = threading.Lock()  # one producer, written to by every query's (and tenant's) thread
    writers = [
        BatchWriter(
            settings,
            plan.name,
            mongo,
            after_delta=_fault_hook(),
            only_tenant=args.tenant,
            changes=changes,
            tables_lock=tables_lock,
            incident_index=incident_index,
            publish_lock=publish_lock,
        )
        for plan in plans
    ]
    supervisor = _Supervisor(
        lambda i: _start(spark, settings, plans[i], writers[i], args.available_now), len(plans), args.available_now
    )
    if args.ready_file:
        args.ready_file.write_text(f"{os.getpid()} {time.time():.0f}\n")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        # Only flag it: calling into py4j from a signal handler re-enters the gateway connection.
        supervisor.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        supervisor.run()
        log.info("stream.stopping")
        for q in supervisor.queries:
            q.stop()
    finally:
        for writer in writers:
            writer.close()
        changes.close()
        mongo.close()
        spark.stop()
    failures = [f"{q.name}: {q.exception()}" for q in supervisor.queries if q.exception() is not None]
    if failures:
        raise SystemExit("streaming query failed: " + "; ".join(failures))


def main(argv: list[str] | None = None) -> None:
    args = _parse_args(argv)
    settings = get_settings()
    configure_telemetry(settings.telemetry, "stream")
    run(settings, args)


if __name__ == "__main__":
    main(sys.argv[1:])
