"""The admin API's entry point: ``python -m api`` (also ``metalake api``): serve the admin API, bootstrap, list,
rotate and revoke platform administrators, rotate the signing keys."""

from __future__ import annotations

import json
import sys
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from pymongo import MongoClient

from api.auth.keys import KeysUnavailable, SigningKeyStore
from api.context import ApiContext
from api.services import audit, platform_clients
from api.settings import AdminApiSettings
from control.auth.clients import ClientConflict, ClientRecord, ClientStore, Role
from control.auth.principal import Principal, Scope
from metalake.console import fail
from metalake.mongo import mongo_client
from metalake.settings import load_settings
from tenants.naming import CONTROL_DATABASE

app = typer.Typer(
    help="The tenant-admin API (FastAPI + the built-in OAuth 2 authorization server). Without a subcommand: serve "
    "it with uvicorn on settings.api.host:port. Needs METALAKE_API__KEY_ENCRYPTION_KEY to issue tokens (see "
    "docs/api.md).",
    invoke_without_command=True,
)


# Who the audit names for what an operator does on the host (it holds the control plane's credentials anyway).
CLI_PRINCIPAL = Principal(subject="cli", tenant=None, scopes=frozenset({Scope.PLATFORM_ADMIN.value}))


def _mongo(settings: AdminApiSettings) -> MongoClient[dict[str, Any]]:
    return mongo_client(settings)


@app.callback()
def serve(
    ctx: typer.Context,
    host: Annotated[str | None, typer.Option(help="Bind address (default settings.api.host).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default settings.api.port).")] = None,
    log_level: Annotated[str, typer.Option(help="uvicorn log level.")] = "info",
) -> None:
    """Serve the API (when no subcommand is given)."""
    if ctx.invoked_subcommand is not None:
        return
    import uvicorn
    from opentelemetry.sdk.resources import Resource

    from api.app import create_app
    from metalake.telemetry.exposition import install_meter_provider
    from metalake.telemetry.setup import install_tracer_provider

    settings = load_settings(AdminApiSettings)
    if host is not None:
        settings.api.host = host
    if port is not None:
        settings.api.port = port
    if settings.api.key_encryption_key is None and settings.api.external_issuer is None:
        raise fail(
            "set METALAKE_API__KEY_ENCRYPTION_KEY (seals the token signing keys) or METALAKE_API__EXTERNAL_ISSUER"
        )
    # The meter provider GET /metrics reads (metalake.telemetry.exposition); the API keeps uvicorn's logging.
    component = {"service.name": settings.telemetry.service_name, "service.component": "api"}
    install_meter_provider(Resource.create(component))
    # Its publishes (asset edits, dead-letter replays, test sends) start traces (docs/operations.md#traces).
    install_tracer_provider(settings.telemetry, Resource.create(component))
    # One process: rate limits and caches are per process (docs/api.md); scale out with more hosts.
    uvicorn.run(create_app(settings), host=settings.api.host, port=settings.api.port, log_level=log_level)


@app.command("create-admin")
def create_admin(
    name: Annotated[str, typer.Option(help="What the client is for.")] = "platform-admin",
) -> None:
    """Create a platform-admin API client and print its id and secret once (JSON on stdout)."""
    settings = load_settings(AdminApiSettings)
    with _mongo(settings) as mongo:
        record, secret = ClientStore(mongo[CONTROL_DATABASE]).create(None, Role.PLATFORM_ADMIN, name)
        audit.record_platform(ApiContext(settings, mongo), CLI_PRINCIPAL, "client.create", record.client_id, audit.DONE)
    out = {"client_id": record.client_id, "client_secret": secret, "scopes": list(record.scopes)}
    sys.stdout.write(json.dumps(out) + "\n")
    typer.echo("store the secret now: it is not shown again", err=True)


def _admin_json(record: ClientRecord) -> dict[str, Any]:
    return {
        "client_id": record.client_id,
        "name": record.name,
        "state": record.state,
        "scopes": list(record.scopes),
        "created_at": record.created_at.isoformat(),
        "revoked_at": record.revoked_at.isoformat() if record.revoked_at else None,
        "secrets_valid": len(record.live_secrets(datetime.now(UTC))),
    }


@app.command("list-admins")
def list_admins() -> None:
    """List the platform-admin API clients, active and revoked (JSON on stdout; secrets are never shown)."""
    settings = load_settings(AdminApiSettings)
    with _mongo(settings) as mongo:
        store = ClientStore(mongo[CONTROL_DATABASE])
        items: list[dict[str, Any]] = []
        after: str | None = None
        while page := platform_clients.list_admins(store, after=after, limit=500):
            items += [_admin_json(r) for r in page]
            after = page[-1].client_id
    sys.stdout.write(json.dumps({"items": items}) + "\n")


@app.command("rotate-admin")
def rotate_admin(
    client_id: Annotated[str, typer.Argument(help="The platform admin's client_id (see list-admins).")],
    overlap_seconds: Annotated[
        int | None,
        typer.Option(
            min=0,
            max=30 * 86_400,
            help="How long the previous secret stays valid (default settings.api.secret_overlap_s; 0 revokes it now).",
        ),
    ] = None,
) -> None:
    """Give a platform admin a new secret and print it once (JSON on stdout); audited in the platform audit."""
    settings = load_settings(AdminApiSettings)
    overlap = settings.api.secret_overlap_s if overlap_seconds is None else overlap_seconds
    with _mongo(settings) as mongo:
        store = ClientStore(mongo[CONTROL_DATABASE])
        try:
            rotated = platform_clients.rotate_admin(
                ApiContext(settings, mongo), store, CLI_PRINCIPAL, client_id, overlap
            )
        except ClientConflict:
            raise fail("the client changed concurrently; retry") from None
    if rotated is None:
        raise fail(f"{client_id}: no such active platform-admin client")
    record, secret = rotated
    sys.stdout.write(json.dumps({**_admin_json(record), "client_secret": secret}) + "\n")
    typer.echo("store the secret now: it is not shown again", err=True)


@app.command("revoke-admin")
def revoke_admin(
    client_id: Annotated[str, typer.Argument(help="The platform admin's client_id (see list-admins).")],
    force: Annotated[
        bool, typer.Option("--force", help="Revoke it even if it is the last active platform admin.")
    ] = False,
) -> None:
    """Revoke a platform admin: its secrets stop working at once, its tokens within settings.api.client_cache_ttl_s
    (the API's client cache). Refuses the last active platform admin unless --force; audited."""
    settings = load_settings(AdminApiSettings)
    with _mongo(settings) as mongo:
        store = ClientStore(mongo[CONTROL_DATABASE])
        try:
            record = platform_clients.revoke_admin(
                ApiContext(settings, mongo), store, CLI_PRINCIPAL, client_id, force=force
            )
        except platform_clients.LastPlatformAdmin:
            raise fail(f"{client_id} is the last active platform admin: pass --force to revoke it anyway") from None
    if record is None:
        raise fail(f"{client_id}: no such platform-admin client")
    sys.stdout.write(json.dumps(_admin_json(record)) + "\n")


@app.command("rotate-keys")
def rotate_keys() -> None:
    """Make a new signing key active; the previous one stays in the JWKS until its tokens have expired."""
    settings = load_settings(AdminApiSettings)
    with _mongo(settings) as mongo:
        store = SigningKeyStore(mongo[CONTROL_DATABASE], settings.api)
        try:
            active = store.rotate()
        except KeysUnavailable as exc:
            raise fail(str(exc)) from None
        audit.record_platform(ApiContext(settings, mongo), CLI_PRINCIPAL, "signing_key.rotate", active.kid, audit.DONE)
        keys = [
            {
                "kid": k.kid,
                "alg": k.alg,
                "active": k.active,
                "expires_at": k.expires_at.isoformat() if k.expires_at else None,
            }
            for k in store.keys()
        ]
    sys.stdout.write(json.dumps({"active": active.kid, "keys": keys}) + "\n")


def main() -> None:
    app(prog_name="python -m api")
