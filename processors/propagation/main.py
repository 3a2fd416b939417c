"""The propagation processor's entry point: ``python -m processors.propagation run|dry-run`` (also
``metalake propagation``).

``run`` is the consumer loop. Progress goes to the JSON logs (``propagation.published`` per batch that published,
``propagation.progress`` every ``--progress-s`` seconds). SIGTERM or SIGINT stops it after the batch in hand; the
offsets of a batch are committed only once its events are confirmed.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import threading
import time
from pathlib import Path
from types import FrameType
from typing import Annotated

import typer

from catalog.propagation import dry_run_tenant
from catalog.propagation.config import limits_from
from catalog.propagation.dry_run import InvalidDryRun, check_request
from catalog.propagation.store import TooLarge, load_tenant
from metalake.console import REFUSED, fail
from metalake.http.health import serve_health, standard_checks
from metalake.kafka import BatchConsumer, EventProducer
from metalake.mongo import mongo_client
from metalake.settings import load_settings
from metalake.telemetry import configure_telemetry
from metalake.tenancy import InvalidTenantId
from processors.propagation.processor import AfterPublishHook, PropagationProcessor
from processors.propagation.settings import PropagationProcessSettings
from tenants.naming import CHANGES_TOPIC, names_for, validate_tenant_id
from tenants.registry import TenantDirectory

log = logging.getLogger(__name__)


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


def run(
    settings: PropagationProcessSettings,
    tenants: list[str] | None = None,
    group: str | None = None,
    ready_file: Path | None = None,
    progress_s: float = 30.0,
) -> None:
    mongo = mongo_client(settings)
    directory = TenantDirectory.connect(settings)
    producer = EventProducer(settings)
    limits = limits_from(settings.propagation)
    processor = PropagationProcessor(
        lambda tenant: load_tenant(mongo[names_for(tenant, settings.lake_root).mongo_database], tenant, limits),
        producer,
        lambda tenant: directory.names(tenant).priority_topic,
        tenants=tenants,
        after_publish=_fault_hook(settings.faults.pause_after_publish),
    )
    consumer = BatchConsumer(
        settings,
        group or settings.propagation.group_id,
        [CHANGES_TOPIC],
        on_assignment=lambda owned: processor.retain({p for topic, p in owned if topic == CHANGES_TOPIC}),
    )
    stopping = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stopping.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        for tenant in tenants or ():
            processor.reconcile(tenant)
        if ready_file:
            ready_file.write_text(f"{os.getpid()} {time.time():.0f}\n")
        log.info("propagation.started", extra={"tenants": tenants or "all"})
        records = 0
        last = time.monotonic()
        while not stopping.is_set():
            records += consumer.process_once(
                processor,
                settings.propagation.batch_size,
                settings.propagation.poll_timeout_s,
            )
            if time.monotonic() - last >= progress_s:
                log.info("propagation.progress", extra={"records": records})
                records, last = 0, time.monotonic()
    finally:
        log.info("propagation.stopping")
        consumer.close()
        producer.close()
        mongo.close()


app = typer.Typer(
    help="Tag propagation along lineage (Apache Atlas semantics, column level): the processor that publishes "
    "propagated tags, and a dry-run of what a tag would reach. See docs/propagation.md.",
    no_args_is_help=True,
)


def _tenant_ids(values: list[str] | None) -> list[str] | None:
    try:
        return [validate_tenant_id(v) for v in values] if values else None
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None


@app.command("run")
def run_command(
    tenant: Annotated[
        list[str] | None,
        typer.Option(help="Only these tenants (repeatable; default: all). Reconciled at start.", callback=_tenant_ids),
    ] = None,
    group: Annotated[str | None, typer.Option(help="Consumer group (default: METALAKE_PROPAGATION__GROUP_ID).")] = None,
    ready_file: Annotated[
        Path | None, typer.Option(help="Written once the loop runs (for supervisors and tests).")
    ] = None,
    progress_s: Annotated[float, typer.Option(help="Seconds between progress log lines.")] = 30.0,
) -> None:
    """Consume metalake.changes and publish propagated/unpropagated tags (SIGTERM/Ctrl-C stop it after the batch).

    Settings: METALAKE_PROPAGATION__* (consumer group, batch size, guardrails). Logs are JSON on stderr.
    """
    settings = load_settings(PropagationProcessSettings)
    configure_telemetry(settings.telemetry, "propagation")
    serve_health(settings, "propagation", standard_checks(settings, "mongo", "kafka"))
    run(settings, tenant, group, ready_file, progress_s)


@app.command("dry-run")
def dry_run_command(
    tenant: Annotated[str, typer.Option(help="The tenant that holds the asset.")],
    urn: Annotated[str, typer.Option(help="The asset the tag would be put on.")],
    tag: Annotated[str, typer.Option(help="The tag, e.g. PII.")],
    max_depth: Annotated[int | None, typer.Option(help="Hops from the asset (default: the configured limit).")] = None,
) -> None:
    """Print (JSON) what the tag would reach from the asset, with path and depth, without changing anything."""
    settings = load_settings(PropagationProcessSettings)
    try:
        names = names_for(tenant, settings.lake_root)
        check_request(urn, tag)
    except (InvalidTenantId, InvalidDryRun) as exc:
        raise fail(str(exc), REFUSED) from None
    client = mongo_client(settings)
    try:
        result = dry_run_tenant(
            client[names.mongo_database],
            tenant,
            urn,
            tag,
            limits_from(settings.propagation, max_depth),
            max_edges=settings.propagation.dry_run_max_edges,
        )
    except TooLarge as exc:
        raise fail(str(exc), REFUSED) from None
    finally:
        client.close()
    typer.echo(json.dumps(result.as_dict(), indent=2))


def main() -> None:
    app(prog_name="python -m processors.propagation")
