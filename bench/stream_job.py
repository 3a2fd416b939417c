"""The enrichment job's pooled query, pointed at a benchmark's own topic (run by bench/stream_bench.py).

The job only knows the shared pooled topics or one dedicated tenant's topics; a benchmark with N tenants needs the
pooled code path (one query, rows split by tenant) without reading anybody else's events. This runs the job's own
pieces (``BatchWriter`` with no tenant filter, the same Kafka source options and supervisor) on one topic of the
benchmark, with its own query name (Delta txnAppId) and checkpoint. Settings come from the environment as for the job,
e.g. ``METALAKE_ENRICHMENT__TENANT_PARALLELISM`` (the bench's ``--job-parallelism`` sets it).

    .stack/venv/bin/python bench/stream_job.py --topic T --query-name Q --checkpoint DIR --ready-file F
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType

from pymongo import MongoClient

from metalake.kafka import EventProducer
from metalake.settings import get_settings
from metalake.telemetry import configure_telemetry
from processors.enrichment.health import IncidentIndex
from processors.enrichment.jobs.stream import QueryPlan, _start, _Supervisor
from processors.enrichment.session import build_spark
from processors.enrichment.writer import BatchWriter


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--topic", required=True, help="the benchmark's pooled-style topic (events of N tenants)")
    parser.add_argument("--query-name", required=True, help="query name = Delta txnAppId")
    parser.add_argument("--checkpoint", type=Path, required=True)
    parser.add_argument("--ready-file", type=Path, required=True)
    args = parser.parse_args()

    settings = get_settings()
    configure_telemetry(settings.telemetry, "stream-bench")
    plan = QueryPlan(args.query_name, [args.topic], args.checkpoint)
    spark = build_spark(settings, args.query_name)
    mongo: MongoClient[dict[str, object]] = MongoClient(
        settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms
    )
    # The real job's work, changes and auto-classification included (the changes topic is shared; the bench
    # tenants are fresh, so no subscription matches them).
    changes = EventProducer(settings)
    writer = BatchWriter(
        settings, plan.name, mongo, changes=changes, tables_lock=threading.Lock(), incident_index=IncidentIndex()
    )
    supervisor = _Supervisor(lambda i: _start(spark, settings, plan, writer, False), 1, False)
    args.ready_file.write_text(f"{os.getpid()} {time.time():.0f}\n")

    def on_signal(signum: int, frame: FrameType | None) -> None:
        supervisor.stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        supervisor.run()
        for q in supervisor.queries:
            q.stop()
    finally:
        writer.close()
        changes.close()
        mongo.close()
        spark.stop()


if __name__ == "__main__":
    main()
