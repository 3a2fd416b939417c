"""``metalake lake``: operations on the Delta tables and the MongoDB projection, each a Spark subprocess."""

from __future__ import annotations

import subprocess
import sys
from typing import Annotated

import typer

from metalake.settings import get_settings

app = typer.Typer(
    help="Lake operations on the Delta tables and the MongoDB projection: maintain, erase (GDPR), reconcile, prune, "
    "init, drop (tenant deletion). "
    "Each runs `python -m processors.lake.<command>` in a subprocess (Spark starts only there): progress on stderr, "
    "a JSON report on stdout; exit 0 done, 1 failed, 2 refused (unknown tenant, invalid URN, unsafe option). "
    "See docs/lake.md.",
    no_args_is_help=True,
)


def _lake(command: str, args: list[str]) -> typer.Exit:
    """Run a lake command as a subprocess (its output passes through) and exit with its code."""
    return typer.Exit(code=subprocess.call([sys.executable, "-m", f"processors.lake.{command}", *args]))


def _tenant_opt(tenant: str | None) -> list[str]:
    return ["--tenant", tenant] if tenant else []


@app.command("maintain")
def lake_maintain(
    tenant: Annotated[
        str | None, typer.Option(help="Only this tenant (default: every tenant, and the shared tables whole).")
    ] = None,
    retention_hours: Annotated[
        int, typer.Option(help="VACUUM keeps files removed less than this long ago; 168 (Delta's minimum) or more.")
    ] = 168,
) -> None:
    """Compact small files (OPTIMIZE), checkpoint and VACUUM the Delta tables of the tenant(s): the shared tables
    once (a named pooled tenant: its bucket's partitions), dedicated tenants' own tables, every tenant's audit.

    Safe while the streaming job runs: commit conflicts are retried. Prints files and bytes before/after per table.
    """
    raise _lake("maintain", [*_tenant_opt(tenant), "--retention-hours", str(retention_hours)])


@app.command("erase")
def lake_erase(
    tenant: Annotated[str, typer.Option(help="The tenant that holds the asset.")],
    urn: Annotated[str, typer.Option(help="The asset's URN, e.g. urn:metalake:postgres:prod/shop/public/orders.")],
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

    Records the erase in the tenant's audit table with the URN's sha256, never the URN. Cannot be undone.
    """
    from processors.lake.discover import connect
    from processors.lake.errors import EXIT_USAGE, LakeUsageError
    from processors.lake.scope import erase_target

    try:  # refuse a typo before asking, and before Spark starts
        with connect(get_settings()) as directory:
            names = directory.named(tenant)
        erase_target(names.tenant_id, urn, include_children)
    except LakeUsageError as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=EXIT_USAGE) from None
    if not yes:
        if not sys.stdin.isatty():
            typer.secho("error: refusing to erase without a terminal to confirm; pass --yes", fg="red", err=True)
            raise typer.Exit(code=EXIT_USAGE)
        what = f"{urn} and everything under it" if include_children else urn
        typer.confirm(f"Erase {what} from tenant {tenant}, permanently?", abort=True)
    args = ["--tenant", tenant, "--urn", urn, "--actor", actor, *(["--include-children"] if include_children else [])]
    raise _lake("erase", [*args, *(["--erasure-id", erasure_id] if erasure_id else [])])


@app.command("reconcile")
def lake_reconcile(
    tenant: Annotated[str, typer.Option(help="The tenant whose MongoDB projection to check and rebuild.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report the difference; change nothing.")] = False,
) -> None:
    """Compare the MongoDB projection with the Delta state tables, report missing/extra/stale documents and repair
    them from Delta (guarded upserts, safe while the job runs). 0 differences is the healthy result."""
    raise _lake("reconcile", ["--tenant", tenant, *(["--dry-run"] if dry_run else [])])


@app.command("prune")
def lake_prune(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (default: every tenant).")] = None,
    older_than_days: Annotated[
        int, typer.Option(help="Resolved incidents last updated longer ago than this leave MongoDB.")
    ] = 30,
) -> None:
    """Delete resolved incidents older than the recent window from MongoDB (Delta keeps the full history)."""
    raise _lake("prune", [*_tenant_opt(tenant), "--older-than-days", str(older_than_days)])


@app.command("init")
def lake_init(
    tenant: Annotated[str, typer.Option(help="The tenant whose Delta tables to create and register in Trino.")],
    dedicated: Annotated[
        bool, typer.Option("--dedicated", help="The tenant is dedicated: it gets tables of its own.")
    ] = False,
) -> None:
    """Create the tenant's Delta tables (its own if dedicated, else the shared ones if missing; audit included) and
    register them in Trino; idempotent. The admin API runs it when it provisions a tenant, so the tenant is
    queryable before its first event."""
    raise _lake("init", ["--tenant", tenant, *(["--dedicated"] if dedicated else [])])


@app.command("drop")
def lake_drop(
    tenant: Annotated[str, typer.Option(help="The tenant whose Delta rows and lake folder to delete.")],
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation (required without a TTY).")] = False,
) -> None:
    """Delete a tenant's Delta data: its rows of the shared tables (then VACUUM the touched tables with 0 hours of
    retention: time travel before the drop is lost for every tenant of those tables) and its lake folder (a
    dedicated tenant's tables, every tenant's audit). MongoDB, Trino and topics are not touched. Cannot be undone.
    """
    from processors.lake.errors import EXIT_USAGE

    if not yes:
        if not sys.stdin.isatty():
            typer.secho("error: refusing to drop without a terminal to confirm; pass --yes", fg="red", err=True)
            raise typer.Exit(code=EXIT_USAGE)
        typer.confirm(f"Delete every Delta row of tenant {tenant}, permanently?", abort=True)
    raise _lake("drop", ["--tenant", tenant])
