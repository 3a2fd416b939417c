"""The ``metalake`` command line."""

from __future__ import annotations

import subprocess
import sys
import time
from typing import Annotated

import typer

from api.cli import app as api_app
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
lake_app = typer.Typer(
    help="Lake operations on the Delta tables and the MongoDB projection: maintain, erase (GDPR), reconcile, prune, "
    "init, drop (tenant deletion). "
    "Each runs `python -m processors.lake.<command>` in a subprocess (Spark starts only there): progress on stderr, "
    "a JSON report on stdout; exit 0 done, 1 failed, 2 refused (unknown tenant, invalid URN, unsafe option). "
    "See docs/lake.md.",
    no_args_is_help=True,
)
app.add_typer(lake_app, name="lake")
app.add_typer(api_app, name="api")
access_app = typer.Typer(
    help="Trino access rules: each tenant's users see only its schema, PII-tagged columns masked without the PII "
    "role. Rendered from the tenants registry and the tenants' tags into the rules file Trino reloads every second. "
    "See docs/serving.md.",
    no_args_is_help=True,
)
app.add_typer(access_app, name="access")


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
    with_processors: Annotated[
        bool,
        typer.Option(
            "--with-processors",
            help="Also start the job, the admin API and the processors (propagation, outbound, access).",
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
    typer.echo(f"{'SERVICE':11} {'STATE':10} {'PID':>7}  {'PORTS':12} DETAIL")
    for r in rows:
        ports = ",".join(str(p) for p in r.ports) or "-"
        typer.echo(f"{r.name:11} {r.state:10} {r.pid or '-':>7}  {ports:12} {r.detail}")
    if any(r.state == "unhealthy" for r in rows):
        raise typer.Exit(code=1)


@stack_app.command("logs")
def stack_logs(
    service: Annotated[
        str,
        typer.Argument(help="kafka, ferretdb, trino, postgres, stream, api, propagation, outbound or access."),
    ],
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
    tenant: Annotated[
        str | None, typer.Option(help="Tenant to create (or reuse) for the demo (default: a fresh demo-<hex>).")
    ] = None,
    timeout: Annotated[float, typer.Option(help="Seconds each wait may take before the demo gives up.")] = 300.0,
) -> None:
    """The whole flow through the admin API: tenant, signed-webhook subscription, catalog with lineage, a PII tag,
    its propagation, the webhooks, Trino and a SQL query as the tenant (see README).

    Needs the stack with the job, the API and the processors: metalake stack up --with-processors
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
    """Run every task of a configured source connector once, resuming from its stored offsets; print the report (JSON,
    per task). Exits 1 if a task did not complete."""
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
    if summary.failed:  # some task failed, is FAILED, or Kafka did not confirm: the report says which
        raise typer.Exit(code=1)


def _lake(command: str, args: list[str]) -> typer.Exit:
    """Run a lake command as a subprocess (its output passes through) and exit with its code."""
    return typer.Exit(code=subprocess.call([sys.executable, "-m", f"processors.lake.{command}", *args]))


def _tenant_opt(tenant: str | None) -> list[str]:
    return ["--tenant", tenant] if tenant else []


@lake_app.command("maintain")
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


@lake_app.command("erase")
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


@lake_app.command("reconcile")
def lake_reconcile(
    tenant: Annotated[str, typer.Option(help="The tenant whose MongoDB projection to check and rebuild.")],
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only report the difference; change nothing.")] = False,
) -> None:
    """Compare the MongoDB projection with the Delta state tables, report missing/extra/stale documents and repair
    them from Delta (guarded upserts, safe while the job runs). 0 differences is the healthy result."""
    raise _lake("reconcile", ["--tenant", tenant, *(["--dry-run"] if dry_run else [])])


@lake_app.command("prune")
def lake_prune(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant (default: every tenant).")] = None,
    older_than_days: Annotated[
        int, typer.Option(help="Resolved incidents last updated longer ago than this leave MongoDB.")
    ] = 30,
) -> None:
    """Delete resolved incidents older than the recent window from MongoDB (Delta keeps the full history)."""
    raise _lake("prune", [*_tenant_opt(tenant), "--older-than-days", str(older_than_days)])


@lake_app.command("init")
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


@lake_app.command("drop")
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


@access_app.command("run")
def access_run() -> None:
    """Regenerate the rules as classifications and propagated tags change (consumes metalake.changes; Ctrl-C stops)."""
    from metalake.telemetry import configure_telemetry
    from processors.access.runner import run

    settings = get_settings()
    configure_telemetry(settings.telemetry, "access")
    try:
        run(settings)
    except KeyboardInterrupt:
        pass


@access_app.command("sync")
def access_sync(
    tenant: Annotated[list[str] | None, typer.Option(help="Only refresh these tenants' masks (default: all).")] = None,
) -> None:
    """Refresh the tenants' masked columns from MongoDB and Trino once and rewrite the rules file."""
    from typing import Any

    from pymongo import MongoClient

    from processors.access.sync import AccessSync

    settings = get_settings()
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True, socketTimeoutMS=60_000)
    try:
        done = AccessSync(settings, client).sync(tenant or None)
    finally:
        client.close()
    typer.echo(f"rules for {len(done)} tenant(s) refreshed: {settings.access_rules_file}")


outbound_app = typer.Typer(
    help="The outbound runtime: committed changes (metalake.changes) to Slack, Jira and signed webhooks, per each "
    "tenant's subscriptions. See docs/outbound.md.",
    no_args_is_help=True,
)
app.add_typer(outbound_app, name="outbound")


@outbound_app.command("run")
def outbound_run() -> None:
    """Run the outbound runtime in the foreground (SIGTERM/Ctrl-C stop it after the current batch).

    Settings: METALAKE_OUTBOUND__* (consumer groups, retries and backoff, timeouts, SSRF allowlist).
    """
    from metalake.telemetry import configure_telemetry
    from processors.outbound.run import run

    settings = get_settings()
    configure_telemetry(settings.telemetry, "outbound")
    run(settings)


propagation_app = typer.Typer(
    help="Tag propagation along lineage (Apache Atlas semantics, column level): the processor that publishes "
    "propagated tags, and a dry-run of what a tag would reach. See docs/propagation.md.",
    no_args_is_help=True,
)
app.add_typer(propagation_app, name="propagation")


@propagation_app.command("run")
def propagation_run(
    tenant: Annotated[
        list[str] | None, typer.Option(help="Only these tenants (repeatable; default: all). Reconciled at start.")
    ] = None,
    group: Annotated[str | None, typer.Option(help="Consumer group (default: METALAKE_PROPAGATION__GROUP_ID).")] = None,
    ready_file: Annotated[str | None, typer.Option(help="Written once the loop runs.")] = None,
    progress_s: Annotated[float, typer.Option(help="Seconds between progress log lines.")] = 30.0,
) -> None:
    """Consume metalake.changes and publish propagated/unpropagated tags (SIGTERM/Ctrl-C stop it after the batch).

    Settings: METALAKE_PROPAGATION__* (consumer group, batch size, guardrails). Logs are JSON on stderr.
    """
    from processors.propagation.run import main as run_main

    args = [*(a for t in tenant or () for a in ("--tenant", t)), "--progress-s", str(progress_s)]
    args += ["--group", group] if group else []
    args += ["--ready-file", ready_file] if ready_file else []
    run_main(args)


@propagation_app.command("dry-run")
def propagation_dry_run(
    tenant: Annotated[str, typer.Option(help="The tenant that holds the asset.")],
    urn: Annotated[str, typer.Option(help="The asset the tag would be put on.")],
    tag: Annotated[str, typer.Option(help="The tag, e.g. PII.")],
    max_depth: Annotated[int | None, typer.Option(help="Hops from the asset (default: the configured limit).")] = None,
) -> None:
    """Print (JSON) what the tag would reach from the asset, with path and depth, without changing anything."""
    import json
    from typing import Any

    from pymongo import MongoClient

    from processors.propagation import dry_run_tenant
    from processors.propagation.config import limits_from
    from processors.propagation.dry_run import InvalidDryRun, check_request
    from tenants.naming import InvalidTenantId, names_for

    settings = get_settings()
    try:
        names = names_for(tenant, settings.lake_root)
        check_request(urn, tag)
    except (InvalidTenantId, InvalidDryRun) as exc:
        typer.secho(f"error: {exc}", fg=typer.colors.RED, err=True)
        raise typer.Exit(code=2) from None
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True)
    try:
        result = dry_run_tenant(client[names.mongo_database], tenant, urn, tag, limits_from(settings, max_depth))
    finally:
        client.close()
    typer.echo(json.dumps(result.as_dict(), indent=2))


def main() -> None:
    app()
