"""``metalake demo`` and ``metalake job``: the end-to-end demo, and a processing job in the foreground."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Annotated

import typer

from metalake.console import fail
from ops.settings import get_settings

# One Typer app per command: a single-command app becomes that command, so the root can load each on demand.
demo_app = typer.Typer()
job_app = typer.Typer()


@demo_app.command("demo")
def demo(
    tenant: Annotated[
        str | None, typer.Option(help="Tenant to create (or reuse) for the demo (default: a fresh demo-<hex>).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds each wait may take before the demo gives up.")] = 300.0,
) -> None:
    """The whole flow through the admin API: tenant, signed-webhook subscription, catalog with lineage, a PII tag,
    its propagation, the webhooks, Trino and a SQL query as the tenant (see README).

    Needs the stack with the job, the API and the processors: metalake stack up --with-processors
    """
    from ops.demo.flow import DemoError, run_demo

    try:
        run_demo(get_settings(), tenant, timeout_s=timeout, echo=typer.echo)
    except DemoError as exc:
        raise fail(str(exc)) from None


@job_app.command("job")
def job(
    name: Annotated[str, typer.Argument(help="The job to run in the foreground: stream.")] = "stream",
) -> None:
    """Run a processing job in the foreground (Ctrl-C stops it cleanly)."""
    if name != "stream":
        raise fail(f"unknown job {name!r}; known: stream")
    started = time.monotonic()
    code = subprocess.call([sys.executable, "-m", "processors.enrichment"])
    typer.echo(f"job {name} ended with code {code} after {time.monotonic() - started:.0f}s")
    raise typer.Exit(code=code)
