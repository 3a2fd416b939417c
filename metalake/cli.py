"""The ``metalake`` command line."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Annotated

import typer

from metalake.settings import find_project_root, get_settings
from metalake.stack import StackError, StackManager

app = typer.Typer(
    help="metalake: an event-driven metadata platform (CloudEvents on Kafka, Spark + Delta, MongoDB, Trino).",
    no_args_is_help=True,
    add_completion=False,
)
stack_app = typer.Typer(
    help="The local stack: Kafka (KRaft), FerretDB, Trino, PostgreSQL and the Spark streaming job, on loopback, "
    "fetched and built into .stack/ on first use.",
    no_args_is_help=True,
)
app.add_typer(stack_app, name="stack")
connect_app = typer.Typer(
    help="The connector worker: webhooks, the ingest API and the management API; crawls of source connectors.",
    no_args_is_help=True,
)
app.add_typer(connect_app, name="connect")


def _manager() -> StackManager:
    return StackManager(get_settings(), find_project_root(), echo=typer.echo)


def _fail(message: str) -> typer.Exit:
    typer.secho(f"error: {message}", fg=typer.colors.RED, err=True)
    return typer.Exit(code=1)


@stack_app.command("up")
def stack_up(
    services: Annotated[
        list[str] | None, typer.Argument(help="Only these services (default: all infrastructure).")
    ] = None,
    with_job: Annotated[bool, typer.Option("--with-job", help="Also start the Spark streaming job.")] = False,
) -> None:
    """Fetch (once), configure and start the services, waiting until each answers its health check.

    Idempotent: running services are left alone. Ports come from METALAKE_STACK__PORTS__<SERVICE>.
    """
    manager = _manager()
    try:
        manager.up(services or None, with_job=with_job)
    except StackError as exc:
        raise _fail(str(exc)) from None


@stack_app.command("down")
def stack_down(
    services: Annotated[list[str] | None, typer.Argument(help="Only these services (default: all).")] = None,
) -> None:
    """Stop what the stack started (and nothing else). Data and caches stay in .stack/."""
    manager = _manager()
    try:
        manager.down(services or None)
    except StackError as exc:
        raise _fail(str(exc)) from None


@stack_app.command("status")
def stack_status() -> None:
    """Each service with its state, ports, pid and health. Exits 1 if any started service is unhealthy."""
    manager = _manager()
    rows = manager.status()
    typer.echo(f"{'SERVICE':9} {'STATE':10} {'PID':>7}  {'PORTS':12} DETAIL")
    for r in rows:
        ports = ",".join(str(p) for p in r.ports) or "-"
        typer.echo(f"{r.name:9} {r.state:10} {r.pid or '-':>7}  {ports:12} {r.detail}")
    if any(r.state == "unhealthy" for r in rows):
        raise typer.Exit(code=1)


@stack_app.command("logs")
def stack_logs(
    service: Annotated[str, typer.Argument(help="kafka, ferretdb, trino, postgres or stream.")],
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many lines from the end.")] = 50,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new lines.")] = False,
) -> None:
    """Print the end of a service's log."""
    manager = _manager()
    try:
        path = manager.log_path(service)
    except StackError as exc:
        raise _fail(str(exc)) from None
    if not path.exists():
        raise _fail(f"{service} has no log yet ({path})")
    cmd = ["tail", "-n", str(lines), *(["-F"] if follow else []), str(path)]
    raise typer.Exit(code=subprocess.call(cmd))


@app.command("demo")
def demo(
    tenant: Annotated[str, typer.Option(help="Tenant to publish the demo events for.")] = "acme",
    timeout: Annotated[float, typer.Option(help="Seconds to wait for the events to become visible.")] = 180.0,
) -> None:
    """Publish a few events (and one invalid record) and show what landed in Delta, MongoDB and Trino.

    Needs the stack and the streaming job: metalake stack up --with-job
    """
    from metalake.demo import DemoError, run_demo

    try:
        run_demo(get_settings(), tenant, timeout_s=timeout, echo=typer.echo)
    except DemoError as exc:
        raise _fail(str(exc)) from None


@app.command("job")
def job(
    name: Annotated[str, typer.Argument(help="The job to run in the foreground: stream.")] = "stream",
) -> None:
    """Run a processing job in the foreground (Ctrl-C stops it cleanly)."""
    if name != "stream":
        raise _fail(f"unknown job {name!r}; known: stream")
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-m", "processors.enrichment.jobs.stream"])
    typer.echo(f"job {name} ended with code {code} after {time.monotonic() - started:.0f}s")
    raise typer.Exit(code=code)


@connect_app.command("run")
def connect_run(
    host: Annotated[str | None, typer.Option(help="Bind address (default: METALAKE_CONNECT__HOST, loopback).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: METALAKE_CONNECT__PORT, 8083).")] = None,
) -> None:
    """Serve the worker in the foreground. Needs METALAKE_CONNECT__ADMIN_TOKEN (or METALAKE_CONNECT__DEV_MODE=true)."""
    import uvicorn

    from connectors.runtime.worker import WorkerConfigError, create_app
    from metalake.telemetry import configure_telemetry

    settings = get_settings()
    configure_telemetry(settings.telemetry, "connect")
    try:
        application = create_app(settings)
    except WorkerConfigError as exc:
        raise _fail(str(exc)) from None
    uvicorn.run(
        application,
        host=host or settings.connect.host,
        port=port or settings.connect.port,
        log_config=None,  # keep the JSON logging configure_telemetry installed
        access_log=False,
    )


@connect_app.command("crawl")
def connect_crawl(
    tenant: Annotated[str, typer.Option(help="The tenant the connector belongs to.")],
    name: Annotated[str, typer.Option(help="The connector's name.")],
) -> None:
    """Run a configured source connector once, resuming from its stored offsets, and print the summary (JSON)."""
    import json

    from connectors.runtime.errors import TaskFailed
    from connectors.runtime.offsets import OffsetsUnavailable
    from connectors.runtime.source_runner import CrawlRefused, crawl
    from connectors.runtime.worker import build_runtime
    from metalake.kafka import PublishError
    from metalake.telemetry import configure_telemetry

    settings = get_settings()
    configure_telemetry(settings.telemetry, "connect")
    runtime = build_runtime(settings)
    try:
        summary = crawl(runtime, tenant, name)
    except (CrawlRefused, TaskFailed, PublishError, OffsetsUnavailable) as exc:
        raise _fail(str(exc)) from None
    finally:
        runtime.publisher.close()
        runtime.offsets.close()
    typer.echo(json.dumps(summary.as_dict(), indent=2))


def main() -> None:
    app()
