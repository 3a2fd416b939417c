"""The ``metalake`` command: one group per deployable or tool, each imported only when it runs.

Loading a group on demand keeps every extra optional: ``metalake connect run`` needs only ``metalake[connectors]``,
never the admin API's or Spark's dependencies (a group's module imports its deployable at the top).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

import typer
from typer import _click as click
from typer.core import TyperGroup

from ops.stack.paths import use_checkout_stack


@dataclass(frozen=True)
class Entry:
    """A subcommand: where its Typer app lives, and the one-line help ``metalake --help`` shows without loading it."""

    target: str
    summary: str


COMMANDS: dict[str, Entry] = {
    "stack": Entry("ops.cli.stack:app", "The local stack of real services: Kafka, FerretDB, Trino, PostgreSQL, Spark."),
    "demo": Entry("ops.cli.run:demo_app", "The whole flow end to end through the admin API (needs the stack)."),
    "job": Entry("ops.cli.run:job_app", "Run a processing job in the foreground."),
    "api": Entry("api.main:app", "The tenant-admin API: serve it, manage platform admins, rotate signing keys."),
    "connect": Entry(
        "connectors.main:app",
        "The connector worker (Monte Carlo webhooks, the ingest API, OpenLineage) and source connectors (PostgreSQL "
        "crawls, dbt artifacts).",
    ),
    "lake": Entry(
        "processors.lake.main:app",
        "Lake operations: maintain, erase (GDPR), reconcile, prune, init, drop; the erasure worker.",
    ),
    "access": Entry("processors.access.main:app", "Trino access rules: tenant isolation and PII masks."),
    "outbound": Entry(
        "processors.outbound.main:app",
        "The outbound runtime: Slack, Jira, Microsoft Teams, Freshdesk and signed webhooks.",
    ),
    "propagation": Entry("processors.propagation.main:app", "Tag propagation along lineage, and its dry run."),
    "secrets": Entry("ops.cli.secrets:app", "Tenants' third-party secrets at rest: reseal under the current key."),
    "dlq": Entry("ops.cli.dlq:app", "A tenant's dead letters through the admin API: list, show, replay."),
    "masking": Entry("ops.cli.masking:app", "PII masks for the customer's own engines: Snowflake masking policies."),
    "kafka": Entry("ops.cli.kafka:app", "The Kafka ACLs of metalake's processes: print them, apply them."),
    "cost": Entry("ops.cli.cost:app", "What a platform costs on AWS each month, per component and per tenant."),
}


def load(name: str) -> click.Command:
    """The click command of a subcommand, importing its module now."""
    module_name, attr = COMMANDS[name].target.split(":")
    app = getattr(importlib.import_module(module_name), attr)
    command = typer.main.get_command(app)
    command.name = name
    return command


class LazyGroup(TyperGroup):
    """A group whose subcommands are imported when one is invoked (or asked for its own help)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in COMMANDS:
            return None
        return load(cmd_name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # The listing uses the summaries, so `metalake --help` imports no deployable.
        with formatter.section("Commands"):
            formatter.write_dl([(name, entry.summary) for name, entry in COMMANDS.items()])


app = typer.Typer(
    cls=LazyGroup,
    name="metalake",
    help="metalake: an event-driven metadata platform (CloudEvents on Kafka, Spark + Delta, MongoDB, Trino).",
    no_args_is_help=True,
    add_completion=False,
    # Rich's help lists every subcommand's own help, which would import them all; ours lists the summaries.
    rich_markup_mode=None,
)


@app.callback()
def root() -> None:
    """metalake: an event-driven metadata platform (CloudEvents on Kafka, Spark + Delta, MongoDB, Trino)."""


def main() -> None:
    # The operator's command works on the checkout it runs in: it and every process it starts use its .stack/.
    use_checkout_stack()
    # Named as the console script also under `python -m ops` (the stack starts processes that way).
    app(prog_name="metalake")
