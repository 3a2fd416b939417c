"""``metalake access``: the Trino access rules (tenant isolation, PII masks)."""

from __future__ import annotations

from typing import Annotated

import typer

from metalake.settings import get_settings

app = typer.Typer(
    help="Trino access rules: each tenant's users see only its schema, PII-tagged columns masked without the PII "
    "role. Rendered from the tenants registry and the tenants' tags into the rules file Trino reloads every second. "
    "See docs/serving.md.",
    no_args_is_help=True,
)


@app.command("run")
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


@app.command("sync")
def access_sync(
    tenant: Annotated[list[str] | None, typer.Option(help="Only refresh these tenants' masks (default: all).")] = None,
) -> None:
    """Refresh the tenants' masked columns from MongoDB and Trino once and rewrite the rules file."""
    from typing import Any

    from pymongo import MongoClient

    from tenants.access.sync import AccessSync

    settings = get_settings()
    client: MongoClient[dict[str, Any]] = MongoClient(settings.mongo_uri, tz_aware=True, socketTimeoutMS=60_000)
    try:
        done = AccessSync(settings, client).sync(tenant or None)
    finally:
        client.close()
    typer.echo(f"rules for {len(done)} tenant(s) refreshed: {settings.access_rules_file}")
