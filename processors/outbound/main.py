"""The outbound runtime's entry point: ``python -m processors.outbound run`` (also ``metalake outbound run``), in the
foreground.

SIGTERM/SIGINT stop it after the current batch; ``kill -9`` is safe too (the batch is redelivered and the ledger
keeps what was already sent from being sent again).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from datetime import timedelta
from types import FrameType
from typing import Any

import typer
from pymongo import MongoClient

from control.subscriptions.store import SubscriptionStore
from control.subscriptions.testsend import TestOutcomes
from metalake.http.health import serve_health, standard_checks
from metalake.kafka import EventProducer, ensure_topics
from metalake.mongo import mongo_client
from metalake.net.ssrf import AddressGuard
from metalake.sealing import Sealer, sealer_for
from metalake.settings import load_settings
from metalake.telemetry import configure_telemetry
from processors.outbound.runtime.catalog import Catalog
from processors.outbound.runtime.destination import DestinationEnv, load_destinations
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.ledger import Ledger
from processors.outbound.runtime.loops import DLQ_TOPIC, RETRY_TOPIC, Loops, Outbound
from processors.outbound.runtime.retry import RetryPolicy
from processors.outbound.runtime.subscriptions import SubscriptionCache
from processors.outbound.runtime.testsend import SubscriptionTester
from processors.outbound.settings import OutboundProcessSettings
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE, OUTBOUND_TESTS_TOPIC

Mongo = MongoClient[dict[str, Any]]
# Where subscriptions are read: the control plane, or (the bench) a store scoped to one tenant.
StoreFactory = Callable[[Mongo, Sealer | None], SubscriptionStore]


def control_plane_store(mongo: Mongo, sealer: Sealer | None) -> SubscriptionStore:
    return SubscriptionStore(mongo[CONTROL_DATABASE], sealer)


def build(
    settings: OutboundProcessSettings, mongo: Mongo, store: StoreFactory = control_plane_store
) -> tuple[Outbound, EventProducer]:
    control = mongo[CONTROL_DATABASE]
    guard = AddressGuard.from_settings(settings.outbound.ssrf_allow)
    outbound = settings.outbound
    catalog = Catalog(
        mongo,
        lambda: settings.lake_root,
        max_depth=outbound.impact_max_depth,
        max_assets=outbound.impact_max_assets,
    )
    destinations = load_destinations(DestinationEnv(settings, guard, catalog))
    subscriptions = store(mongo, sealer_for(settings))
    cache = SubscriptionCache(subscriptions, settings.outbound.subscriptions_ttl_s)
    retention = timedelta(seconds=settings.outbound.ledger_retention_s)
    ledger = Ledger(control, retention, settings.mongo.outage_wait_s)
    dispatcher = Dispatcher(
        cache,
        destinations,
        ledger,
        RetryPolicy.from_settings(settings.outbound),
        asset_tags=catalog.tags,
    )
    tester = SubscriptionTester(
        subscriptions,
        destinations,
        ledger,
        TestOutcomes(control, retention),
        settings.outbound.test_expiry_s,
        deadline_s=settings.outbound.delivery_deadline_s,
    )
    producer = EventProducer(settings)
    return Outbound(settings, dispatcher, producer, tester), producer


def run(settings: OutboundProcessSettings, store: StoreFactory = control_plane_store) -> None:
    ensure_topics(settings, [CHANGES_TOPIC, OUTBOUND_TESTS_TOPIC, RETRY_TOPIC, DLQ_TOPIC])
    mongo = mongo_client(settings)
    outbound, producer = build(settings, mongo, store)
    runtime = Loops(settings, outbound)

    def stop(signum: int, frame: FrameType | None) -> None:
        runtime.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        runtime.run()
    finally:
        producer.close()
        mongo.close()


app = typer.Typer(
    help="The outbound runtime: committed changes (metalake.changes) to Slack, Jira, Microsoft Teams, Freshdesk and "
    "signed webhooks, per each tenant's subscriptions. See docs/outbound.md.",
    no_args_is_help=True,
)


@app.callback()
def outbound() -> None:
    """The outbound runtime (a group, so ``run`` stays a subcommand beside those to come)."""


@app.command("run")
def run_command() -> None:
    """Run the outbound runtime in the foreground (SIGTERM/Ctrl-C stop it after the current batch).

    Settings: METALAKE_OUTBOUND__* (consumer groups, retries and backoff, timeouts, SSRF allowlist).
    """
    settings = load_settings(OutboundProcessSettings)
    configure_telemetry(settings.telemetry, "outbound")
    serve_health(settings, "outbound", standard_checks(settings, "mongo", "kafka"))
    run(settings)


def main() -> None:
    app(prog_name="python -m processors.outbound")
