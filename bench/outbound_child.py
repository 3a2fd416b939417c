"""The outbound runtime of ``processors.outbound.main`` (same build: destinations, dispatcher, ledger, retry topic,
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
from typing import Any

from control.subscriptions.store import Subscription, SubscriptionStore
from metalake.sealing import Sealer
from metalake.settings import load_settings
from metalake.telemetry import configure_telemetry
from ops.settings import Settings
from ops.stack.paths import use_checkout_stack
from processors.outbound.main import run


class TenantScopedStore(SubscriptionStore):
    def __init__(self, database: Any, tenant: str, sealer: Sealer | None) -> None:
        super().__init__(database, sealer)
        self.tenant = tenant

    def active(self, tenant: str) -> list[Subscription]:
        return super().active(tenant) if tenant == self.tenant else []


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--subscriptions-db", required=True, help="the MongoDB database holding the subscription")
    args = parser.parse_args()
    settings = load_settings(Settings)
    configure_telemetry(settings.telemetry, "outbound")
    run(settings, lambda mongo, sealer: TenantScopedStore(mongo[args.subscriptions_db], args.tenant, sealer))


if __name__ == "__main__":
    use_checkout_stack()  # settings read the checkout's .stack/ (in this process and its children)
    main()
