"""The streaming job: the event topics -> Delta (the lake query) and -> MongoDB (the projection queries).

Run it with ``metalake stack up --with-job`` (managed) or ``python -m processors.enrichment`` (foreground).
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer
from pyspark.sql import SparkSession
from pyspark.sql.streaming.query import StreamingQuery

from metalake.http.health import serve_health, standard_checks
from metalake.kafka import EventProducer
from metalake.kafka.config import describe, spark_kafka_options
from metalake.kafka.security import java_failure_setting
from metalake.mongo import mongo_client
from metalake.settings import load_settings
from metalake.telemetry import configure_telemetry
from metalake.telemetry.metrics import CONSUMER_LAG
from processors.enrichment.admission import TenantAdmission
from processors.enrichment.health import IncidentIndex
from processors.enrichment.lag import EndOffsets, lag_readings
from processors.enrichment.lake import AfterLakeHook, LakeWriter
from processors.enrichment.projector import AfterMongoHook, ProjectionWriter
from processors.enrichment.registrar import TrinoRegistrar
from processors.enrichment.session import build_spark
from processors.enrichment.settings import StreamSettings
from processors.enrichment.single_writer import WriterLeases
from processors.enrichment.tables import Layout
from processors.settings import FaultSettings
from tenants.naming import CONTROL_DATABASE, TopicClass, event_topics, names_for

TOPIC_CLASSES: tuple[TopicClass, ...] = ("priority", "bulk")

log = logging.getLogger("processors.enrichment.main")


@dataclass(frozen=True)
class JobOptions:
    """What one run of the job reads and writes (the command line's options)."""

    tenant: str | None = None
    topics: tuple[str, ...] | None = None
    query_name: str | None = None
    available_now: bool = False
    ready_file: Path | None = None
    # Over health.ports.enrichment; a dedicated tenant's job serves health and metrics only on a port given here.
    health_port: int | None = None

    def __post_init__(self) -> None:
        if self.topics and self.tenant:
            raise ValueError("--topics and --tenant exclude each other: a dedicated tenant's job reads its own topics")
        if self.topics is not None and len(self.topics) != len(TOPIC_CLASSES):
            raise ValueError("--topics takes two topic names: PRIORITY,BULK")


def _kill(point: str, batch_id: int) -> None:
    log.warning("fault.kill", extra={"point": point, "batch_id": batch_id})
    os.kill(os.getpid(), signal.SIGKILL)


def _after_lake_hook(faults: FaultSettings) -> AfterLakeHook | None:
    """``faults.kill_after_delta``: die after that lake batch's Delta commits, before Spark records its offsets. With
    ``faults.lake_only`` the projection queries do not run, so MongoDB stays behind: the crash lands between the two
    stores."""
    target = faults.kill_after_delta
    if target is None:
        return None
    return lambda batch_id: _kill("after_delta", batch_id) if batch_id == target else None


def _after_mongo_hook(faults: FaultSettings) -> AfterMongoHook | None:
    """``faults.kill_after_mongo``: die after that projection batch's MongoDB writes, before its changes are
    published and its offsets recorded."""
    target = faults.kill_after_mongo
    if target is None:
        return None
    return lambda tenant, batch_id: _kill("after_mongo", batch_id) if batch_id == target else None


@dataclass(frozen=True)
class QueryPlan:
    name: str
    topics: list[str]
    checkpoint: Path
    trigger: str
    max_offsets: int
    # The Spark scheduler pool: the projection's small jobs run beside the lake's, not queued behind its MERGEs.
    pool: str


def _plan(settings: StreamSettings, args: JobOptions) -> list[QueryPlan]:
    """The lake query over both topics (one commit per table and batch), and one projection query per topic class,
    so a backlog of columns on the bulk topic never delays the priority topic in MongoDB.

    Pooled by default; with ``--tenant`` the dedicated tenant's own topics and checkpoints. The lake query's name is
    also the Delta ``txnAppId``."""
    spark = settings.spark
    if args.tenant:
        names = names_for(args.tenant, settings.lake_root, dedicated=True)
        base = args.query_name or f"metalake-dedicated-{args.tenant}"
        topics = {tc: names.topic(tc) for tc in TOPIC_CLASSES}

        def checkpoint(name: str) -> Path:
            return names.checkpoint_dir(settings.checkpoint_root, name)
    else:
        base = args.query_name or spark.query_name
        chosen = list(args.topics) if args.topics else event_topics()
        topics = dict(zip(TOPIC_CLASSES, chosen, strict=True))

        def checkpoint(name: str) -> Path:
            return settings.checkpoint_root / "_pooled" / name

    lake = QueryPlan(
        f"{base}-lake",
        [topics[tc] for tc in TOPIC_CLASSES],
        checkpoint(f"{base}-lake"),
        spark.trigger_interval,
        spark.max_offsets_per_trigger,
        "lake",
    )
    projections = [
        QueryPlan(
            f"{base}-mongo-{tc}",
            [topics[tc]],
            checkpoint(f"{base}-mongo-{tc}"),
            spark.projection_trigger_interval,
            spark.projection_max_offsets_per_trigger,
            f"mongo-{tc}",
        )
        for tc in TOPIC_CLASSES
    ]
    if settings.faults.lake_only:
        return [lake]
    return [lake, *projections]


def _start(
    spark: SparkSession, settings: StreamSettings, plan: QueryPlan, writer: Callable[..., None], available_now: bool
) -> StreamingQuery:
    # A thread-local property the query's thread inherits: its jobs go to its own pool of the FAIR scheduler.
    spark.sparkContext.setLocalProperty("spark.scheduler.pool", plan.pool)
    source = (
        spark.readStream.format("kafka")
        .options(**spark_kafka_options(settings))
        .option("subscribe", ",".join(plan.topics))
        .option("startingOffsets", "earliest")
        .option("includeHeaders", "true")
        .option("maxOffsetsPerTrigger", plan.max_offsets)
        .load()
    )
    stream = (
        source.writeStream.foreachBatch(writer).queryName(plan.name).option("checkpointLocation", str(plan.checkpoint))
    )
    if available_now:
        stream = stream.trigger(availableNow=True)
    else:
        stream = stream.trigger(processingTime=plan.trigger)
    query = stream.start()
    log.info(
        "stream.started",
        extra={
            "query": plan.name,
            "topics": plan.topics,
            "checkpoint": str(plan.checkpoint),
            "kafka": describe(settings.kafka),
        },
    )
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
        # A refused password or untrusted CA says which setting to fix (the Java client's text does not).
        setting = java_failure_setting(str(error))
        hint = {} if setting is None else {"setting": setting}
        if len(recent) > MAX_RESTARTS:
            log.error(
                "stream.query_failed",
                extra={"query": name, "failures": len(recent), "error": str(error)[:4000], **hint},
            )
            return False
        delay = _backoff_s(len(recent))
        log.warning(
            "stream.query_restarting",
            extra={"query": name, "failures": len(recent), "in_s": delay, "error": str(error)[:4000], **hint},
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


def _liveness(supervisor: _Supervisor) -> Callable[[], str | None]:
    """Alive while every query runs (a failed one is down until the supervisor restarted it)."""

    def liveness() -> str | None:
        stopped = [q.name for q in supervisor.queries if not q.isActive]
        return f"queries not running: {', '.join(stopped)}" if stopped else None

    return liveness


def _observe(settings: StreamSettings, args: JobOptions, supervisor: _Supervisor) -> Callable[[], None]:
    """The queries' consumer lag (read at scrape time) and the health server; returns what stops both."""
    end_offsets = EndOffsets(settings)
    unwatch_lag = CONSUMER_LAG.watch(
        lambda: lag_readings(((q.name, q.lastProgress) for q in supervisor.queries), end_offsets)
    )
    # health.ports.enrichment is the pooled job's only: a dedicated tenant's job inherits the same environment, so the
    # same port; it serves one given on its command line.
    health = (
        None
        if args.tenant and args.health_port is None
        else serve_health(
            settings,
            "enrichment",
            standard_checks(settings, "mongo", "kafka", "trino", "lake"),
            _liveness(supervisor),
            port=args.health_port,
        )
    )

    def stop() -> None:
        unwatch_lag()
        if health is not None:
            health.close()

    return stop


def run(settings: StreamSettings, args: JobOptions) -> None:
    plans = _plan(settings, args)
    spark = build_spark(settings, plans[0].name.rsplit("-", 1)[0])
    mongo = mongo_client(settings)
    changes = EventProducer(settings)
    publish_lock = threading.Lock()  # one producer, written to by both projection queries' threads
    incidents = IncidentIndex()
    names = names_for(args.tenant, settings.lake_root, dedicated=True) if args.tenant else None
    layout = Layout(settings.lake_root, names)
    registrar = TrinoRegistrar(settings, dedicated=names)
    admission = TenantAdmission.connect(mongo)
    lake = LakeWriter(
        settings,
        plans[0].name,
        layout,
        only_tenant=args.tenant,
        after_lake=_after_lake_hook(settings.faults),
        tenants_seen=registrar.saw,
        admission=admission,
        leases=WriterLeases.in_database(mongo[CONTROL_DATABASE], settings.lake.writer_lease)
        if settings.lake_on_s3
        else None,
    )
    added = lake.prepare(spark)
    registrar.start(columns_changed=bool(added))
    projectors = [
        ProjectionWriter(
            settings,
            plan.name,
            mongo,
            changes,
            incidents,
            only_tenant=args.tenant,
            publish_lock=publish_lock,
            after_mongo=_after_mongo_hook(settings.faults),
            admission=admission,
        )
        for plan in plans[1:]
    ]
    writers: list[Callable[..., None]] = [lake, *projectors]
    supervisor = _Supervisor(
        lambda i: _start(spark, settings, plans[i], writers[i], args.available_now), len(plans), args.available_now
    )
    if args.ready_file:
        args.ready_file.write_text(f"{os.getpid()} {time.time():.0f}\n")
    stop_observing = _observe(settings, args, supervisor)

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
        stop_observing()
        registrar.close()
        for projector in projectors:
            projector.close()
        changes.close()
        mongo.close()
        spark.stop()
    failures = [f"{q.name}: {q.exception()}" for q in supervisor.queries if q.exception() is not None]
    if failures:
        raise SystemExit("streaming query failed: " + "; ".join(failures))


app = typer.Typer(add_completion=False)


@app.command()
def stream(
    tenant: Annotated[
        str | None,
        typer.Option(help="Run the queries of one dedicated tenant (its own topics and checkpoints), not the pooled."),
    ] = None,
    topics: Annotated[
        str | None,
        typer.Option(
            help="PRIORITY,BULK: read these topics instead of the pooled ones, with the pooled tables as the target "
            "(benchmarks run the job on topics of their own). Not with --tenant."
        ),
    ] = None,
    query_name: Annotated[
        str | None,
        typer.Option(
            help="Base name of the queries (<base>-lake, <base>-mongo-priority, <base>-mongo-bulk): checkpoints, and "
            "the lake query's Delta txnAppId."
        ),
    ] = None,
    available_now: Annotated[
        bool, typer.Option("--available-now", help="Process what is in Kafka now, then stop (backfills, tests).")
    ] = False,
    ready_file: Annotated[
        Path | None, typer.Option(help="Touched once the streaming queries run (for supervisors).")
    ] = None,
    health_port: Annotated[
        int | None,
        typer.Option(
            help="Port of the job's health server (/healthz, /readyz, /metrics), over METALAKE_HEALTH__PORTS__"
            "ENRICHMENT; a dedicated tenant's job (--tenant) serves one only on this port."
        ),
    ] = None,
) -> None:
    """Stream metalake events from Kafka into Delta (the pooled tables, or a dedicated tenant's own) and, in queries
    of their own, into the MongoDB projection. Ctrl-C stops it cleanly."""
    try:
        options = JobOptions(
            tenant, tuple(topics.split(",")) if topics else None, query_name, available_now, ready_file, health_port
        )
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    settings = load_settings(StreamSettings)
    configure_telemetry(settings.telemetry, "stream")
    run(settings, options)


def main() -> None:
    app(prog_name="python -m processors.enrichment")
