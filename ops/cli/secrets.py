"""``metalake secrets``: the tenants' third-party secrets at rest (``metalake.sealing``; docs/configuration.md)."""

from __future__ import annotations

import hashlib
import json
import sys
from datetime import UTC, datetime
from typing import Annotated

import typer

from control.connectors.store import ControlStore
from control.subscriptions.store import SubscriptionStore
from metalake.console import fail
from metalake.mongo import mongo_client
from metalake.s3 import lake_storage_options
from metalake.sealing import ResealCount, SealingError, require, sealer_for
from metalake.settings import load_settings
from ops.settings import Settings
from tenants.naming import CONTROL_DATABASE, platform_audit_dir

app = typer.Typer(
    help="Tenants' third-party secrets (connector passwords, webhook signing secrets, Slack and Jira tokens, "
    "webhook keys), sealed in metalake_control under the key-encryption key.",
    no_args_is_help=True,
)


@app.callback()
def secrets() -> None:
    """Tenants' third-party secrets at rest."""


@app.command("reseal")
def reseal(
    tenant: Annotated[str | None, typer.Option(help="Only this tenant's secrets (default: every tenant's).")] = None,
) -> None:
    """Seal every stored secret under the current key-encryption key.

    Values sealed under a previous key (METALAKE_SECRETS__PREVIOUS_KEY_ENCRYPTION_KEYS) are re-sealed, values stored
    in clear by an older version are sealed, values already current are left alone. Safe to run while the services
    run, and again: a document changed meanwhile is skipped and counted as a conflict. Prints counts as JSON (never
    a value) and exits 1 if a value did not open or a document changed meanwhile. Run it after changing the key,
    then remove the previous key from the settings.
    """
    settings = load_settings(Settings)
    try:
        sealer = require(sealer_for(settings))
    except SealingError as exc:
        raise fail(str(exc)) from None
    client = mongo_client(settings)
    try:
        database = client[CONTROL_DATABASE]
        count = (
            ControlStore(database, sealer)
            .secrets.reseal(tenant)
            .merge(SubscriptionStore(database, sealer).reseal(tenant))
        )
    finally:
        client.close()
    _audit(settings, sealer.kek_id, count)
    out = {
        "kek_id": sealer.kek_id,
        "sealed_from_plain": count.plain,
        "resealed_from_previous_key": count.rewrapped,
        "already_current": count.current,
        "not_opened": count.failed,
        "changed_meanwhile": count.conflicts,
    }
    sys.stdout.write(json.dumps(out) + "\n")
    if count.failed or count.conflicts:
        typer.echo(
            "some values were not resealed: configure the key that sealed them (not_opened) or run again "
            "(changed_meanwhile)",
            err=True,
        )
        raise typer.Exit(code=1)


def _audit(settings: Settings, kek_id: str, count: ResealCount) -> None:
    """One row in the platform's audit table, when this host has the lake (the api extra's delta-rs)."""
    lake_root = settings.lake.root
    if lake_root is None:
        typer.echo("lake.root is unset: the reseal is not audited", err=True)
        return
    # Imported here: delta-rs is needed only to audit.
    from control.audit import AuditRow, append

    counts = {
        "sealed_from_plain": count.plain,
        "resealed": count.rewrapped,
        "current": count.current,
        "not_opened": len(count.failed),
        "conflicts": len(count.conflicts),
    }
    result = "done" if not (count.failed or count.conflicts) else "failed"
    target = hashlib.sha256(kek_id.encode()).hexdigest()
    row = AuditRow(datetime.now(UTC), "cli", "secrets.reseal", target, result, counts)
    append(platform_audit_dir(lake_root), [row], lake_storage_options(settings))
