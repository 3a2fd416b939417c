"""``metalake kafka``: what the Kafka cluster must grant metalake's processes (``ops.cli.kafka_acls``)."""

from __future__ import annotations

import json
import sys
from dataclasses import asdict
from enum import StrEnum
from typing import Annotated

import typer
from confluent_kafka import KafkaException

from metalake.console import fail
from metalake.kafka.config import describe
from metalake.settings import load_settings
from ops.cli.kafka_acls import PROCESSES, Process, apply, kafka_acls_commands, render, required_acls
from ops.settings import Settings

app = typer.Typer(help="The Kafka cluster's side of metalake: the ACLs of its processes.", no_args_is_help=True)


class Format(StrEnum):
    table = "table"
    json = "json"
    kafka_acls = "kafka-acls"


@app.callback()
def kafka() -> None:
    """The Kafka cluster's side of metalake."""


@app.command("acls")
def acls(
    apply_: Annotated[
        bool,
        typer.Option(
            "--apply",
            help="Create them on the cluster too, as this process's Kafka client (METALAKE_KAFKA__*: a super user "
            "or a principal with ALTER on the cluster). Existing bindings stay.",
        ),
    ] = False,
    process: Annotated[
        list[str] | None,
        typer.Option(help=f"Only this process kind's (repeatable): {', '.join(PROCESSES)}."),
    ] = None,
    output: Annotated[Format, typer.Option("--format", help="table, json, or kafka-acls.sh commands.")] = Format.table,
) -> None:
    """Print the ACLs each metalake process needs (ALLOW bindings, derived from what its code reads, writes, creates
    and joins), for the principals in METALAKE_KAFKA__PRINCIPALS__*; with --apply, create them on the cluster.

    Dedicated tenants' topics are granted by prefix: a new tenant needs no new ACL. The platform's topics must exist
    (the cluster's administrator creates them at install). Run it again after changing a principal or a group id.
    """
    settings = load_settings(Settings)
    unknown = sorted(set(process or ()) - set(PROCESSES))
    if unknown:
        raise fail(f"--process: unknown {', '.join(unknown)}; known: {', '.join(PROCESSES)}", code=2)
    chosen: list[Process] = [p for p in PROCESSES if not process or p in process]
    bindings = required_acls(settings, chosen)
    if output is Format.json:
        sys.stdout.write(json.dumps([asdict(b) for b in bindings], indent=2) + "\n")
    elif output is Format.kafka_acls:
        sys.stdout.write(kafka_acls_commands(bindings, settings.kafka.bootstrap_servers or "<brokers>") + "\n")
    else:
        sys.stdout.write(render(bindings) + "\n")
    if not apply_:
        return
    try:
        count = apply(settings, bindings)
    except KafkaException as exc:
        # The broker's error only (CLUSTER_AUTHORIZATION_FAILED...): no request, so no credential, in it.
        raise fail(f"the cluster refused the ACLs as {describe(settings.kafka)}: {exc.args[0]}") from None
    typer.echo(f"applied {count} ACL bindings as {describe(settings.kafka)}", err=True)
