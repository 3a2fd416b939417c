"""``metalake stack``: the local stack of real services (no Docker), for development, the demo and the tests."""

from __future__ import annotations

import subprocess
from typing import Annotated

import typer

from metalake.console import fail
from ops.settings import get_settings
from ops.stack import top
from ops.stack.manager import StackError, StackManager
from ops.stack.paths import find_project_root
from ops.stack.services.prometheus import Prometheus

app = typer.Typer(
    help="The local stack: Kafka (KRaft), FerretDB, Trino, PostgreSQL and the Spark streaming job, on loopback, "
    "fetched and built into .stack/ on first use.",
    no_args_is_help=True,
)


def _manager() -> StackManager:
    return StackManager(get_settings(), find_project_root(), echo=typer.echo)


@app.command("up")
def stack_up(
    services: Annotated[
        list[str] | None, typer.Argument(help="Only these services (default: all infrastructure).")
    ] = None,
    with_job: Annotated[
        bool, typer.Option("--with-job", help="Also start the Spark streaming job and the lake worker.")
    ] = False,
    with_processors: Annotated[
        bool,
        typer.Option(
            "--with-processors",
            help="Also start the job, the admin API, the processors (propagation, outbound, access) and the connector "
            "worker (connect).",
        ),
    ] = False,
) -> None:
    """Fetch (once), configure and start the services, waiting until each answers its health check.

    Idempotent: running services are left alone. Ports come from METALAKE_STACK__PORTS__<SERVICE>.
    """
    manager = _manager()
    try:
        manager.up(services or None, with_job=with_job, with_processors=with_processors)
    except StackError as exc:
        raise fail(str(exc)) from None


@app.command("down")
def stack_down(
    services: Annotated[list[str] | None, typer.Argument(help="Only these services (default: all).")] = None,
) -> None:
    """Stop what the stack started (and nothing else). Data and caches stay in .stack/."""
    manager = _manager()
    try:
        manager.down(services or None)
    except StackError as exc:
        raise fail(str(exc)) from None


@app.command("status")
def stack_status() -> None:
    """Each service with its state, ports, pid and health. Exits 1 if any started service is unhealthy."""
    manager = _manager()
    rows = manager.status()
    typer.echo(f"{'SERVICE':11} {'STATE':10} {'PID':>7}  {'PORTS':12} DETAIL")
    for r in rows:
        ports = ",".join(str(p) for p in r.ports) or "-"
        typer.echo(f"{r.name:11} {r.state:10} {r.pid or '-':>7}  {ports:12} {r.detail}")
    if any(r.state == "unhealthy" for r in rows):
        raise typer.Exit(code=1)


@app.command("top")
def stack_top() -> None:
    """Per process, from the stack's Prometheus: up, ready, consumer lag, freshness p50/p99 over the last minute
    (seconds from Kafka to the stores) and events dead-lettered in the last minute. Exits 1 if a process is down or
    not ready. Needs the stack's Prometheus (`metalake stack up` starts it)."""
    manager = _manager()
    try:
        rows = top.read(Prometheus().url(manager.context))
    except top.PrometheusUnavailable as exc:
        raise fail(f"{exc}; start it with: metalake stack up prometheus") from None
    for line in top.render(rows):
        typer.echo(line)
    if any(row.values.get("up", 0) < 1 or row.values.get("ready", 1) < 1 for row in rows):
        raise typer.Exit(code=1)


@app.command("logs")
def stack_logs(
    service: Annotated[
        str,
        typer.Argument(
            help="kafka, ferretdb, trino, postgres, stream, lake-worker, api, propagation, outbound, access or connect."
        ),
    ],
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many lines from the end.")] = 50,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new lines.")] = False,
) -> None:
    """Print the end of a service's log."""
    manager = _manager()
    try:
        path = manager.log_path(service)
    except StackError as exc:
        raise fail(str(exc)) from None
    if not path.exists():
        raise fail(f"{service} has no log yet ({path})")
    cmd = ["tail", "-n", str(lines), *(["-F"] if follow else []), str(path)]
    raise typer.Exit(code=subprocess.call(cmd))
