"""``metalake propagation``: tag propagation along lineage, and its dry run."""

from __future__ import annotations

from typing import Annotated

import typer

from metalake.settings import get_settings

app = typer.Typer(
    help="Tag propagation along lineage (Apache Atlas semantics, column level): the processor that publishes "
    "propagated tags, and a dry-run of what a tag would reach. See docs/propagation.md.",
    no_args_is_help=True,
)


@app.command("run")
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


@app.command("dry-run")
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

    from metalake.propagation import dry_run_tenant
    from metalake.propagation.config import limits_from
    from metalake.propagation.dry_run import InvalidDryRun, check_request
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
