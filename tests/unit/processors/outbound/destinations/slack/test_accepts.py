"""Which changes Slack takes: tagged ones of the default kinds, and per-asset propagated tags only when asked."""

from __future__ import annotations

from catalog.changes import STATE_CHANGED, Change
from control.subscriptions.filters import Filters
from control.subscriptions.store import Subscription
from processors.outbound.destinations.slack.destination import SlackDestination

URN = "urn:metalake:postgres:prod/shop/public/customers/email"


def _change(table: str = "classifications", deleted: bool = False, tag: str = "PII") -> Change:
    return Change(
        "c1", STATE_CHANGED, "acme", {"table": table, "key": {"urn": URN, "tag": tag}, "deleted": deleted}, URN
    )


def test_slack_takes_per_asset_propagated_tags_only_when_asked() -> None:
    slack = SlackDestination(env=None)  # type: ignore[arg-type]
    plain = Subscription("acme", "s", "slack", {"channel": "C1"})
    asked = Subscription("acme", "s", "slack", {"channel": "C1"}, Filters(event_types=("tag.*",)))
    propagated = _change("propagated_tags")
    assert slack.accepts(_change(), plain) and not slack.accepts(propagated, plain)
    assert slack.accepts(propagated, asked)
    untagged = Change("c4", STATE_CHANGED, "acme", {"table": "assets", "key": {"urn": URN}})
    assert not slack.accepts(untagged, plain)
