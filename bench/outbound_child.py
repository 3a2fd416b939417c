"""The outbound runtime of ``processors.outbound.run`` (same build: destinations, dispatcher, ledger, retry topic,
consumer groups from settings), scoped to one tenant's subscriptions, read from a database of the bench's choice.

Why scoped: the bench's runtime has consumer groups of its own on the shared ``metalake.changes``, so unscoped it
would also deliver other tenants' changes to their subscriptions (the integration tests' local Slack and Jira
servers) next to their own runtimes. Other tenants' changes are still read and decoded; they just find no
subscription, as a tenant without subscriptions does. Why another database: the bench's subscription stays out of
the control plane, so no other runtime on the machine (tests allow loopback too) delivers it before this one.

    python bench/outbound_child.py --tenant bench-prop-abc123 --subscriptions-db metalake_bench-prop-abc123
"""

from __future__ import annotations

import argparse
import signal
from types import FrameType
from typing import Any

from pymongo import MongoClient

from metalake.kafka import EventProducer, ensure_topics
from metalake.settings import Settings, load_settings
from metalake.telemetry import configure_telemetry
from processors.outbound.destination import DestinationEnv, load_destinations
from processors.outbound.dispatch import Dispatcher
from processors.outbound.ledger import Ledger
from processors.outbound.retry import RetryPolicy
from processors.outbound.runtime import DLQ_TOPIC, RETRY_TOPIC, Outbound, Runtime
from processors.outbound.ssrf import AddressGuard
from processors.outbound.subscriptions import Subscription, SubscriptionCache, SubscriptionStore
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE


class TenantScopedStore(SubscriptionStore):
    def __init__(self, database: Any, tenant: str) -> None:
        super().__init__(database)
        self.tenant = tenant

    def active(self, tenant: str) -> list[Subscription]:
        return super().active(tenant) if tenant == self.tenant else []


def run(settings: Settings, tenant: str, subscriptions_db: str) -> None:
    ensure_topics(settings, [CHANGES_TOPIC, RETRY_TOPIC, DLQ_TOPIC])
    mongo: MongoClient[dict[str, Any]] = MongoClient(
        settings.mongo_uri, serverSelectionTimeoutMS=settings.mongo.server_selection_timeout_ms, tz_aware=True
    )
    control = mongo[CONTROL_DATABASE]
    destinations = load_destinations(DestinationEnv(settings, AddressGuard.from_settings(settings.outbound.ssrf_allow)))
    cache = SubscriptionCache(TenantScopedStore(mongo[subscriptions_db], tenant), settings.outbound.subscriptions_ttl_s)
    dispatcher = Dispatcher(cache, destinations, Ledger(control), RetryPolicy.from_settings(settings.outbound))
    producer = EventProducer(settings)
    runtime = Runtime(settings, Outbound(settings, dispatcher, producer))

    def stop(signum: int, frame: FrameType | None) -> None:
        runtime.stopping = True

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    try:
        runtime.run()
    finally:
        producer.close()
        mongo.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--subscriptions-db", required=True, help="the MongoDB database holding the subscription")
    args = parser.parse_args()
    settings = load_settings()
    configure_telemetry(settings.telemetry, "outbound")
    run(settings, args.tenant, args.subscriptions_db)


if __name__ == "__main__":
    main()
