"""The ``asset_tags`` filter: a subscription gets a change only while its asset carries one of the tags (directly or
propagated), read once per change and only when a subscription asks; without a reader such subscriptions get
nothing (fail closed)."""

from __future__ import annotations

from collections.abc import Collection

from control.subscriptions.filters import Filters
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from processors.outbound.destinations.freshdesk.destination import FreshdeskDestination
from processors.outbound.destinations.teams.destination import TeamsDestination
from processors.outbound.runtime.destination import Destination
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.retry import RetryPolicy
from tests._support.outbound_helpers import as_change, incident_event

TAGGED = "urn:metalake:snowflake:acme-prod/analytics/public/customers"
PLAIN = "urn:metalake:snowflake:acme-prod/analytics/public/orders"


class _Subscriptions:
    def __init__(self, subs: list[Subscription]) -> None:
        self.subs = subs

    def for_tenant(self, tenant: str) -> list[Subscription]:
        return [s for s in self.subs if s.tenant == tenant]


def _dispatcher(subs: list[Subscription], lookups: list[tuple[str, str]] | None) -> Dispatcher:
    catalog = {TAGGED: {"pii", "Finance"}}

    def asset_tags(tenant: str, urn: str) -> Collection[str]:
        assert lookups is not None
        lookups.append((tenant, urn))
        return catalog.get(urn, set())

    destinations: dict[str, Destination] = {
        "teams": TeamsDestination(env=None),  # type: ignore[arg-type]
        "freshdesk": FreshdeskDestination(env=None),  # type: ignore[arg-type]
    }
    return Dispatcher(
        _Subscriptions(subs),  # type: ignore[arg-type]
        destinations,
        None,  # type: ignore[arg-type]
        RetryPolicy.from_settings(OutboundSettings()),
        asset_tags=asset_tags if lookups is not None else None,
    )


def test_filters_compare_asset_tags_without_case() -> None:
    assert Filters().wants_asset_tags(())
    assert Filters(asset_tags=("PII",)).wants_asset_tags({"pii"})
    assert not Filters(asset_tags=("PII", "GDPR")).wants_asset_tags({"Finance"})
    assert Filters.model_validate({"asset_tags": ["PII"]}).model_dump(mode="json")["asset_tags"] == ["PII"]


def test_incidents_reach_only_subscriptions_whose_asset_tags_the_asset_carries() -> None:
    pii_only = Subscription("acme", "pii-teams", "teams", {}, Filters(asset_tags=("PII",)))
    everything = Subscription("acme", "all-freshdesk", "freshdesk", {"domain": "acme", "email": "g@example.com"})
    lookups: list[tuple[str, str]] = []
    dispatcher = _dispatcher([pii_only, everything], lookups)
    on_tagged = as_change(incident_event("acme", TAGGED, "inc-1", "opened"))
    on_plain = as_change(incident_event("acme", PLAIN, "inc-2", "opened"))
    assert [s.name for s in dispatcher.targets(on_tagged)] == ["all-freshdesk", "pii-teams"]
    assert [s.name for s in dispatcher.targets(on_plain)] == ["all-freshdesk"]
    assert lookups == [("acme", TAGGED), ("acme", PLAIN)]  # once per change


def test_no_lookup_without_such_a_subscription_and_none_reached_without_a_reader() -> None:
    lookups: list[tuple[str, str]] = []
    everything = Subscription("acme", "t", "teams", {})
    change = as_change(incident_event("acme", TAGGED, "inc-1", "opened"))
    assert [s.name for s in _dispatcher([everything], lookups).targets(change)] == ["t"] and lookups == []
    pii_only = Subscription("acme", "pii-teams", "teams", {}, Filters(asset_tags=("PII",)))
    assert _dispatcher([pii_only], None).targets(change) == []
