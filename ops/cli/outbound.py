"""``metalake outbound``: the outbound runtime (Slack, Jira, signed webhooks)."""

from __future__ import annotations

import typer

from metalake.settings import get_settings

app = typer.Typer(
    help="The outbound runtime: committed changes (metalake.changes) to Slack, Jira and signed webhooks, per each "
    "tenant's subscriptions. See docs/outbound.md.",
    no_args_is_help=True,
)


@app.command("run")
def outbound_run() -> None:
    """Run the outbound runtime in the foreground (SIGTERM/Ctrl-C stop it after the current batch).

    Settings: METALAKE_OUTBOUND__* (consumer groups, retries and backoff, timeouts, SSRF allowlist).
    """
    from metalake.telemetry import configure_telemetry
    from processors.outbound.run import run

    settings = get_settings()
    configure_telemetry(settings.telemetry, "outbound")
    run(settings)
