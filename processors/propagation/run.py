"""``metalake propagation run``: the processor's consumer loop (``python -m processors.propagation.run``).

Progress goes to the JSON logs (``propagation.published`` per batch that published, ``propagation.progress`` every
``--progress-s`` seconds). SIGTERM or SIGINT stops it after the batch in hand; the offsets of a batch are committed
only once its events are confirmed.
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

from metalake.kafka import BatchConsumer, EventProducer
from metalake.mongo import mongo_client
from metalake.propagation.config import limits_from
from metalake.propagation.store import load_tenant
from metalake.settings import Settings, get_settings
from metalake.telemetry import configure_telemetry
from processors.propagation.processor import AfterPublishHook, PropagationProcessor
from tenants.naming import CHANGES_TOPIC, names_for, validate_tenant_id
from tenants.registry import TenantDirectory

log = logging.getLogger(__name__)


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="metalake propagation run",
        description="Propagate tags along lineage: consume metalake.changes, publish propagated tags.",
    )
    parser.add_argument(
        "--tenant",
        action="append",
        type=validate_tenant_id,
        help="Only this tenant (repeatable; default: every tenant). Listed tenants are reconciled at start.",
    )
    parser.add_argument("--group", help="Consumer group (default: METALAKE_PROPAGATION__GROUP_ID).")
    parser.add_argument("--ready-file", type=Path, help="Written once the loop runs (for supervisors and tests).")
    parser.add_argument("--progress-s", type=float, default=30.0, help="Seconds between progress log lines.")
    return parser.parse_args(argv)


def _fault_hook(marker: Path | None) -> AfterPublishHook | None:
    """``faults.pause_after_publish`` (fault tests): after the first batch that published, the process writes the
    file and waits, before committing, for the test to kill it."""
    if marker is None:
        return None

    def pause(batch: int) -> None:
        log.warning("fault.pause_after_publish", extra={"batch": batch})
        marker.write_text(f"{os.getpid()}\n")
        threading.Event().wait()

    return pause


def run(settings: Settings, args: argparse.Namespace) -> None:
    mongo = mongo_client(settings)
    directory = TenantDirectory.connect(settings)
    producer = EventProducer(settings)
    limits = limits_from(settings)
    processor = PropagationProcessor(
        lambda tenant: load_tenant(mongo[names_for(tenant, settings.lake_root).mongo_database], tenant, limits),
        producer,
        lambda tenant: directory.names(tenant).priority_topic,
        tenants=args.tenant,
        after_publish=_fault_hook(settings.faults.pause_after_publish),
    )
    consumer = BatchConsumer(settings, args.group or settings.propagation.group_id, [CHANGES_TOPIC])
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for tenant in args.tenant or ():
            processor.reconcile(tenant)
        if args.ready_file:
            args.ready_file.write_text(f"{os.getpid()} {time.time():.0f}\n")
        log.info("propagation.started", extra={"tenants": args.tenant or "all"})
        records = 0
        last = time.monotonic()
        while not stopping.is_set():
            records += consumer.process_once(
                processor,
                settings.propagation.batch_size,
                settings.propagation.poll_timeout_s,
            )
            if time.monotonic() - last >= args.progress_s:
                log.info("propagation.progress", extra={"records": records})
                records, last = 0, time.monotonic()
    finally:
        log.info("propagation.stopping")
        consumer.close()
        producer.close()
        mongo.close()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    settings = get_settings()
    configure_telemetry(settings.telemetry, "propagation")
    run(settings, args)


if __name__ == "__main__":
    main(sys.argv[1:])
