"""The connector worker's entry point: ``python -m connectors run|crawl`` (also ``metalake connect``): the worker
(webhooks, the ingest API, OpenLineage) and runs of source connectors (PostgreSQL crawls, dbt artifacts)."""

from __future__ import annotations

from typing import Annotated

import typer

from connectors.settings import WorkerSettings
from metalake.console import fail
from metalake.settings import load_settings

app = typer.Typer(
    help="The connector worker: Monte Carlo webhooks, the ingest API and OpenLineage (run); source connectors: "
    "PostgreSQL catalog crawls and dbt artifacts (crawl). See docs/connectors/runtime.md.",
    no_args_is_help=True,
)


@app.command("run")
def connect_run(
    host: Annotated[str | None, typer.Option(help="Bind address (default: METALAKE_CONNECT__HOST, loopback).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: METALAKE_CONNECT__PORT, 8083).")] = None,
) -> None:
    """Serve the worker in the foreground. Its connectors and write keys are managed through the admin API."""
    import uvicorn

    from connectors.runtime.worker import create_app
    from metalake.telemetry import configure_telemetry

    settings = load_settings(WorkerSettings)
    configure_telemetry(settings.telemetry, "connect")
    application = create_app(settings)
    uvicorn.run(
        application,
        host=host or settings.connect.host,
        port=port or settings.connect.port,
        log_config=None,  # keep the JSON logging configure_telemetry installed
        access_log=False,
    )


@app.command("crawl")
def connect_crawl(
    tenant: Annotated[str, typer.Option(help="The tenant the connector belongs to.")],
    name: Annotated[str, typer.Option(help="The connector's name.")],
    follow: Annotated[
        bool,
        typer.Option(
            "--follow",
            "-f",
            help="Show progress on stderr as the crawl goes: tables read of those listed, events published.",
        ),
    ] = False,
) -> None:
    """Run every task of a configured source connector once, resuming from its stored offsets; print the report (JSON,
    per task). Exits 1 if a task did not complete."""
    import json

    from connectors.runtime.errors import TaskFailed
    from connectors.runtime.progress import ProgressLines
    from connectors.runtime.source_runner import CrawlRefused, crawl
    from connectors.runtime.worker import build_runtime
    from control.connectors.offsets import OffsetsUnavailable
    from metalake.kafka import PublishError
    from metalake.telemetry import configure_telemetry

    settings = load_settings(WorkerSettings)
    configure_telemetry(settings.telemetry, "connect")
    runtime = build_runtime(settings)
    try:
        progress = ProgressLines(lambda line: typer.echo(line, err=True)) if follow else None
        summary = crawl(runtime, tenant, name, progress=progress)
    except (CrawlRefused, TaskFailed, PublishError, OffsetsUnavailable) as exc:
        raise fail(str(exc)) from None
    finally:
        runtime.publisher.close()
        runtime.offsets.close()
    typer.echo(json.dumps(summary.as_dict(), indent=2))
    if summary.failed:  # some task failed, is FAILED, or Kafka did not confirm: the report says which
        raise typer.Exit(code=1)


def main() -> None:
    app(prog_name="python -m connectors")
