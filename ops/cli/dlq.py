"""``metalake dlq``: a tenant's dead letters through the admin API: list, show, replay (one, several, or every
letter a filter matches, with progress).

The command is a client of the API (it holds no store of its own): ``--api`` (or ``METALAKE_API_URL``; default
``settings.api.issuer_url``) and a tenant admin's credentials from the environment, never from the command line
(where ``ps`` shows them): ``METALAKE_CLIENT_ID`` and ``METALAKE_CLIENT_SECRET`` (client credentials grant), or an
access token in ``METALAKE_TOKEN``.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from typing import Annotated, Any

import httpx
import typer

from ops.settings import Settings

app = typer.Typer(
    name="dlq",
    help=(
        "Dead letters of a tenant (records the connector worker, the outbound runtime or the streaming job could not "
        "process): list "
        "and inspect them (reason, field, origin; the payload with secrets redacted), and replay them once their "
        "cause is fixed. A replay runs the record through the stage that refused it with its current "
        "configuration, publishes once however often it is asked, and is audited. Talks to the admin API: set "
        "METALAKE_CLIENT_ID and METALAKE_CLIENT_SECRET (a tenant admin client) or METALAKE_TOKEN."
    ),
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)

TenantOpt = Annotated[str, typer.Option("--tenant", "-t", help="The tenant whose dead letters to work on.")]
ApiOpt = Annotated[
    str | None,
    typer.Option("--api", envvar="METALAKE_API_URL", help="The admin API's base URL (default: settings.api)."),
]
StageOpt = Annotated[
    str | None,
    typer.Option(help="connectors (both worker stages), mapping, transform, outbound or stream."),
]
ConnectorOpt = Annotated[str | None, typer.Option(help="Only this connector's letters.")]
ErrorClassOpt = Annotated[str | None, typer.Option("--error-class", help="Only this error class, e.g. InvalidPayload.")]
SinceOpt = Annotated[str | None, typer.Option(help="Dead-lettered at or after (ISO 8601 with offset).")]
UntilOpt = Annotated[str | None, typer.Option(help="Dead-lettered before (ISO 8601 with offset).")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON instead of a table.")]


class CliError(RuntimeError):
    pass


def make_http(base_url: str) -> httpx.Client:
    """The HTTP client to the API (tests put an in-process client here)."""
    return httpx.Client(base_url=base_url, timeout=60.0)


def _detail(resp: httpx.Response) -> str:
    try:
        body = resp.json()
    except ValueError:
        return resp.text[:200]
    if isinstance(body, dict):
        field = f" (field {body['field']})" if body.get("field") else ""
        return str(body.get("detail") or body.get("error_description") or body.get("title") or body)[:300] + field
    return str(body)[:300]


class Api:
    def __init__(self, api: str | None) -> None:
        base = api or Settings().api.issuer_url
        self.http = make_http(base)
        token = os.environ.get("METALAKE_TOKEN")
        if not token:
            client_id, secret = os.environ.get("METALAKE_CLIENT_ID"), os.environ.get("METALAKE_CLIENT_SECRET")
            if not client_id or not secret:
                raise CliError("set METALAKE_CLIENT_ID and METALAKE_CLIENT_SECRET, or METALAKE_TOKEN")
            token = self._token(client_id, secret)
        self.headers = {"Authorization": f"Bearer {token}"}

    def _token(self, client_id: str, secret: str) -> str:
        try:
            resp = self.http.post("/oauth/token", data={"grant_type": "client_credentials"}, auth=(client_id, secret))
        except httpx.HTTPError as exc:
            raise CliError(f"POST /oauth/token: {type(exc).__name__}: is the API up at {self.http.base_url}?") from None
        if resp.status_code != 200:
            raise CliError(f"POST /oauth/token answered {resp.status_code}: {_detail(resp)}")
        token: str = resp.json()["access_token"]
        return token

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:  # noqa: ANN401
        try:
            return self.http.request(method, path, headers=self.headers, **kwargs)
        except httpx.HTTPError as exc:
            raise CliError(f"{method} {path}: {type(exc).__name__}: is the API up at {self.http.base_url}?") from None

    def json(self, method: str, path: str, **kwargs: Any) -> Any:  # noqa: ANN401
        resp = self.call(method, path, **kwargs)
        if resp.status_code != 200:
            raise CliError(f"{method} {path} answered {resp.status_code}: {_detail(resp)}")
        return resp.json()


def _prefix(tenant: str) -> str:
    return f"/v1/tenants/{tenant}/dead-letters"


def _pages(api: Api, tenant: str, params: dict[str, Any], limit: int | None) -> Iterator[dict[str, Any]]:
    """Every letter the filters match, page by page, up to ``limit`` (None: all)."""
    cursor: str | None = None
    seen = 0
    while True:
        query = {k: v for k, v in {**params, "cursor": cursor}.items() if v is not None}
        page = api.json("GET", _prefix(tenant), params=query)
        if page.get("truncated") and cursor is None:
            typer.echo("note: older letters were not read (dead_letters.scan_max_records)", err=True)
        for item in page["items"]:
            yield item
            seen += 1
            if limit is not None and seen >= limit:
                return
        cursor = page.get("next_cursor")
        if not cursor:
            return


def _filters(
    stage: str | None, connector: str | None, error_class: str | None, since: str | None, until: str | None
) -> dict[str, Any]:
    return {"stage": stage, "connector": connector, "error_class": error_class, "since": since, "until": until}


def _run(body: Any) -> None:  # noqa: ANN401
    try:
        body()
    except CliError as exc:
        typer.echo(f"error: {exc}", err=True)
        raise typer.Exit(2) from None


@app.command("list")
def list_letters(  # noqa: PLR0913
    tenant: TenantOpt,
    api: ApiOpt = None,
    stage: StageOpt = None,
    connector: ConnectorOpt = None,
    error_class: ErrorClassOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option(help="Show at most this many (newest first).")] = 50,
    as_json: JsonOpt = False,
) -> None:
    """List the tenant's dead letters, newest first: id, time, stage, error class, connector or subscription, field
    and reason, and the replay status. Filter by stage, connector, error class and time."""

    def body() -> None:
        client = Api(api)
        params = {**_filters(stage, connector, error_class, since, until), "limit": min(limit, 500)}
        items = list(_pages(client, tenant, params, limit))
        if as_json:
            typer.echo(json.dumps(items, indent=2))
            return
        for item in items:
            replay = (item.get("replay") or {}).get("status", "-")
            who = item.get("connector") or item.get("subscription") or "-"
            typer.echo(
                f"{item['id']}\t{item['time']}\t{item['stage']}\t{item['error_class']}\t{who}\t"
                f"{item.get('field') or '-'}\t{replay}\t{item['reason']}"
            )
        typer.echo(f"{len(items)} letter(s)", err=True)

    _run(body)


@app.command("show")
def show_letter(
    tenant: TenantOpt,
    letter_id: Annotated[str, typer.Argument(help="The letter's id, e.g. connectors-0-42 (from `list`).")],
    api: ApiOpt = None,
) -> None:
    """Show one letter as JSON: its context, the record's key and allow-listed headers, and its payload with
    secret-named keys and credential-like strings redacted (a non-JSON payload by size and hash only)."""

    def body() -> None:
        typer.echo(json.dumps(Api(api).json("GET", f"{_prefix(tenant)}/{letter_id}"), indent=2))

    _run(body)


@app.command("replay")
def replay_letters(  # noqa: PLR0913
    tenant: TenantOpt,
    letter_ids: Annotated[
        list[str] | None, typer.Argument(help="Letters to replay; none: every letter the filters match.")
    ] = None,
    api: ApiOpt = None,
    stage: StageOpt = None,
    connector: ConnectorOpt = None,
    error_class: ErrorClassOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    limit: Annotated[int, typer.Option(help="With filters: replay at most this many.")] = 1000,
    yes: Annotated[bool, typer.Option("--yes", help="With filters: do not ask before replaying.")] = False,
) -> None:
    """Replay letters once their cause is fixed (e.g. a Monte Carlo warehouse added to the connector's map). Each
    goes back through the stage that refused it with its current configuration; a letter already replayed is
    reported and publishes nothing. Progress is printed per letter; the exit code is 1 if any was refused."""

    def body() -> None:
        client = Api(api)
        ids = list(letter_ids or [])
        if not ids:
            params = {**_filters(stage, connector, error_class, since, until), "limit": 500}
            ids = [
                item["id"]
                for item in _pages(client, tenant, params, limit)
                if (item.get("replay") or {}).get("status") != "replayed"
            ]
            if not ids:
                typer.echo("no letter to replay", err=True)
                return
            if not yes and not typer.confirm(f"replay {len(ids)} letter(s) of {tenant}?"):
                raise typer.Exit(1)
        counts = {"replayed": 0, "already_replayed": 0, "in_progress": 0, "refused": 0, "failed": 0}
        for n, letter in enumerate(ids, 1):
            resp = client.call("POST", f"{_prefix(tenant)}/{letter}/replay")
            if resp.status_code == 200:
                result = resp.json()
                outcome = result["outcome"]
                line = f"{outcome} ({result['published']} published)"
            elif resp.status_code == 409:
                outcome, line = "refused", f"refused: {_detail(resp)}"
            else:
                outcome, line = "failed", f"failed ({resp.status_code}): {_detail(resp)}"
            counts[outcome] += 1
            typer.echo(f"[{n}/{len(ids)}] {letter}: {line}", err=True)
        typer.echo(json.dumps(counts))
        if counts["refused"] or counts["failed"]:
            raise typer.Exit(1)

    _run(body)
