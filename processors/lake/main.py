"""``python -m processors.lake <command>`` (also ``metalake lake``): the lake operations on the Delta tables and the
MongoDB projection. Each prints progress on stderr and a JSON report on stdout; exit 0 done, 1 failed, 2 refused
(unknown tenant, invalid URN, unsafe option). The admin API only queues erasures and tenant (de)provisioning;
``worker`` (a long-running deployable, where Spark work runs) runs ``erase`` for each erasure and the provisioning
steps, ``init --dedicated`` and ``drop`` among them, this way, in child processes, so Spark never starts in the API.
See docs/lake.md.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from metalake.console import fail
from metalake.settings import load_settings
from processors.lake import discover, window
from processors.lake.drop import drop_report
from processors.lake.erase import erase_report
from processors.lake.errors import EXIT_USAGE, LakeUsageError
from processors.lake.init import init_report
from processors.lake.maintain import DEFAULT_RETENTION_HOURS, MIN_RETENTION_HOURS, maintain_report
from processors.lake.prune import prune_report
from processors.lake.reconcile import reconcile_report
from processors.lake.runner import run
from processors.lake.scope import erase_target
from processors.lake.settings import LakeWorkerSettings
from processors.lake.worker import worker_report

app = typer.Typer(
    help="Lake operations on the Delta tables and the MongoDB projection: maintain, erase (GDPR), reconcile, prune, "
    "init, drop (tenant deletion), and the worker that runs the erasures and tenant provisioning the API queues. "
    "Progress on stderr, a JSON report on stdout; exit 0 done, 1 failed, 2 refused (unknown tenant, invalid URN, "
    "unsafe option). See docs/lake.md",
    no_args_is_help=True,
)


def _report(command: str, body: Callable[[LakeWorkerSettings], Mapping[str, Any]]) -> None:
    settings = load_settings(LakeWorkerSettings)
    raise typer.Exit(code=run(command, settings.telemetry, lambda: body(settings)))


def _confirm(question: str, what: str) -> None:
    """Ask on a terminal; without one, refuse (a script must say --yes)."""
    if not sys.stdin.isatty():
        raise fail(f"refusing to {what} without a terminal to confirm; pass --yes", EXIT_USAGE)
    typer.confirm(question, abort=True)


Tenant = Annotated[str, typer.Option(help="The tenant.")]


@app.command("maintain")
def maintain(
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant (default: every tenant, and the shared tables whole).")
    ] = None,
    retention_hours: Annotated[
        int,
        typer.Option(help=f"VACUUM keeps files removed less than this long ago; {MIN_RETENTION_HOURS} or more."),
    ] = DEFAULT_RETENTION_HOURS,
) -> None:
    """Compact small files (OPTIMIZE), checkpoint and VACUUM the Delta tables of the tenant(s): the shared tables
    once (a named pooled tenant: its bucket's partitions), dedicated tenants' own tables, every tenant's audit.

    Safe while the streaming job runs: commit conflicts are retried. Reports files and bytes before/after per table.
    """
    _report("maintain", lambda settings: maintain_report(settings, tenant, retention_hours))


@app.command("erase")
def erase(
    tenant: Annotated[str, typer.Option(help="The tenant that holds the asset.")],
    urn: Annotated[
        str,
        typer.Option(
            help="The asset's URN, e.g. urn:metalake:postgres:prod/shop/public/orders; `-` reads it from stdin "
            "(off the command line, which `ps` shows: the lake worker passes it so)."
        ),
    ],
    actor: Annotated[str, typer.Option(help="Who requests the erase (recorded in the tenant's audit table).")],
    include_children: Annotated[
        bool, typer.Option("--include-children", help="Also erase the assets under the URN (a table's columns).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation (required without a TTY).")] = False,
    erasure_id: Annotated[
        str | None,
        typer.Option(help="A UUID naming this erase in its announcement and report (default: a new one)."),
    ] = None,
) -> None:
    """GDPR erase: remove every row about the URN from the tenant's Delta rows (then VACUUM the touched tables with 0
    hours of retention, so the files are gone from disk and time travel before the erase is lost: for every tenant of
    a touched shared table) and from MongoDB.

    Records the erase in the tenant's audit table with the URN's keyed hash (HMAC under a key derived from the KEK),
    never the URN. Cannot be undone.
    """
    settings = load_settings(LakeWorkerSettings)
    if urn == "-":
        urn = sys.stdin.readline().strip()
    if not yes:
        try:  # refuse a typo before asking, and before Spark starts
            with discover.connect(settings) as directory:
                names = directory.named(tenant)
            erase_target(names.tenant_id, urn, include_children)
        except LakeUsageError as exc:
            raise fail(str(exc), EXIT_USAGE) from None
        what = f"{urn} and everything under it" if include_children else urn
        _confirm(f"Erase {what} from tenant {tenant}, permanently?", "erase")
    _report("erase", lambda _: erase_report(settings, tenant, urn, actor, include_children, erasure_id))


@app.command("worker")
def worker(
    ready_file: Annotated[
        Path | None, typer.Option(help="Written once the worker polls (the local stack's start marker).")
    ] = None,
) -> None:
    """Run the GDPR erasures and the tenant (de)provisioning the admin API queued, until SIGTERM: at most
    erasure.concurrency erasures at a time, each as ``erase`` in a child process group killed after erasure.timeout_s
    (the erasure then fails), and provisioning.concurrency tenants (their ``init``/``drop`` likewise). A crashed
    worker's work is claimed again once its leases expire. Starts no JVM itself."""
    _report("worker", lambda settings: worker_report(settings, ready_file))


@app.command("reconcile")
def reconcile(
    tenant: Annotated[str, typer.Option(help="The tenant whose MongoDB projection to check and rebuild.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report the difference; change nothing.")] = False,
    window_days: Annotated[
        int, typer.Option(help="Resolved incidents older than this stay out of MongoDB (as prune).")
    ] = window.DEFAULT_DAYS,
) -> None:
    """Compare the MongoDB projection with the Delta state tables, report missing/extra/stale documents and repair
    them from Delta (guarded upserts, safe while the job runs). 0 differences is the healthy result."""
    _report("reconcile", lambda settings: reconcile_report(settings, tenant, dry_run, window_days))


@app.command("prune")
def prune(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (default: every tenant).")] = None,
    older_than_days: Annotated[
        int, typer.Option(help="Resolved incidents last updated longer ago than this leave MongoDB.")
    ] = window.DEFAULT_DAYS,
) -> None:
    """Delete resolved incidents older than the recent window from MongoDB (Delta keeps the full history)."""
    _report("prune", lambda settings: prune_report(settings, tenant, older_than_days))


@app.command("init")
def init(
    tenant: Annotated[str, typer.Option(help="The tenant whose Delta tables to create and register in Trino.")],
    dedicated: Annotated[
        bool, typer.Option("--dedicated", help="The tenant is dedicated: it gets tables of its own.")
    ] = False,
) -> None:
    """Create the tenant's Delta tables (its own if dedicated, else the shared ones if missing; audit included) and
    register them in Trino; idempotent. The lake worker runs it when it provisions a dedicated tenant, so the tenant
    is queryable before its first event."""
    _report("init", lambda settings: init_report(settings, tenant, dedicated))


@app.command("drop")
def drop(
    tenant: Annotated[str, typer.Option(help="The tenant whose Delta rows and lake folder to delete.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation (required without a TTY).")] = False,
) -> None:
    """Delete a tenant's Delta data: its rows of the shared tables (then VACUUM the touched tables with 0 hours of
    retention: time travel before the drop is lost for every tenant of those tables) and its lake folder (a
    dedicated tenant's tables, every tenant's audit). MongoDB, Trino and topics are not touched. Cannot be undone.
    """
    if not yes:
        _confirm(f"Delete every Delta row of tenant {tenant}, permanently?", "drop")
    _report("drop", lambda settings: drop_report(settings, tenant))


def main() -> None:
    app(prog_name="python -m processors.lake")
