"""The access processor's entry point: ``python -m processors.access run|sync`` (also ``metalake access``)."""

from __future__ import annotations

import json
import signal
import threading
from typing import Annotated

import typer

from metalake.http.health import serve_health, standard_checks
from metalake.mongo import mongo_client
from metalake.settings import load_settings
from metalake.telemetry import configure_telemetry
from processors.access.decisions import serve_decisions
from processors.access.processor import run
from processors.access.settings import AccessProcessSettings
from tenants.access.sync import AccessSync

# A one-off sync reads every tenant's tags: allow it longer per operation than the processor's steady state.
_SYNC_SOCKET_TIMEOUT_MS = 60_000

app = typer.Typer(
    help="Trino access rules: each tenant's users see only its schema, PII-tagged columns masked without the PII "
    "role. Rendered from the tenants registry and the tenants' tags into the rules file Trino reloads every second. "
    "See docs/serving.md.",
    no_args_is_help=True,
)


@app.command("run")
def run_command() -> None:
    """Regenerate the rules as classifications and propagated tags change (consumes metalake.changes; SIGTERM or
    Ctrl-C stop it after the batch). With ``access.mode=opa`` it also serves Trino's decisions (docs/serving.md)."""
    settings = load_settings(AccessProcessSettings)
    configure_telemetry(settings.telemetry, "access")
    serve_health(settings, "access", standard_checks(settings, "mongo", "kafka", "trino"))
    # SIGTERM (what supervisors send) stops it after the batch, like Ctrl-C: the consumer then leaves its group at
    # once, so the other instances take its partitions without waiting for the session to time out.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda signum, frame: stop.set())
    signal.signal(signal.SIGINT, lambda signum, frame: stop.set())
    client = mongo_client(settings)
    stop_decisions = serve_decisions(settings, client)
    try:
        run(settings, stop=stop)
    finally:
        stop_decisions()
        client.close()


@app.command("sync")
def sync_command(
    tenant: Annotated[list[str] | None, typer.Option(help="Only refresh these tenants' masks (default: all).")] = None,
) -> None:
    """Refresh the tenants' masked columns from MongoDB and Trino once and rewrite the rules file."""
    settings = load_settings(AccessProcessSettings)
    client = mongo_client(settings, socket_timeout_ms=_SYNC_SOCKET_TIMEOUT_MS)
    try:
        done = AccessSync(settings, client).sync(tenant or None)
    finally:
        client.close()
    typer.echo(f"rules for {len(done)} tenant(s) refreshed: {settings.access_rules_file}")


@app.command("migrate-schemas")
def migrate_schemas_command() -> None:
    """Move tenants' Trino schemas to their current keyed names (from names made of the tenant id alone, or under a
    previous key), then rewrite the rules file. Idempotent; the access processor also does it at start. Prints one
    JSON line per schema; exits 1 if something stayed in an old schema (``left``) or a move failed (``error``: run
    it again)."""
    settings = load_settings(AccessProcessSettings)
    client = mongo_client(settings, socket_timeout_ms=_SYNC_SOCKET_TIMEOUT_MS)
    try:
        sync = AccessSync(settings, client)
        moves = sync.move_schemas()
        sync.sync(None)
    finally:
        client.close()
    for move in moves:
        out = {"tenant": move.tenant, "from": move.old, "to": move.new, "left": list(move.left), "error": move.error}
        typer.echo(json.dumps(out))
    typer.echo(f"{sum(m.error is None for m in moves)} schema(s) moved", err=True)
    if any(move.left or move.error for move in moves):
        raise typer.Exit(code=1)


def main() -> None:
    app(prog_name="python -m processors.access")
