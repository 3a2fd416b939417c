"""The "incidents on PII-tagged assets to Slack" example of docs/outbound.md is what the API and Slack take, and its
filters pick what the page says: an incident on a PII-tagged asset (direct or propagated tag), no incident on an
untagged one, no tag change."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from api.schemas.subscriptions import SubscriptionCreate
from control.subscriptions.store import Subscription
from processors.outbound.destinations.slack.destination import SlackDestination
from processors.outbound.destinations.slack.spec import SlackSpec
from processors.outbound.runtime.dispatch import Dispatcher
from tests._support.outbound_helpers import as_change, classification_event, incident_event

DOC = Path(__file__).resolve().parents[6] / "docs" / "outbound.md"
TAGGED, UNTAGGED = "urn:metalake:snowflake:acme-prod/analytics/public/orders", "urn:metalake:snowflake:acme-prod/x/y"


def _example() -> dict[str, Any]:
    section = DOC.read_text("utf-8").split("\n## Incidents\n", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```json\n(.*?)```", section, re.DOTALL)
    body: dict[str, Any] = json.loads(block)
    return body


class _Subscriptions:
    def __init__(self, sub: Subscription) -> None:
        self.sub = sub

    def for_tenant(self, tenant: str) -> list[Subscription]:
        return [self.sub]


def test_the_incidents_example_is_taken_and_filters_as_documented() -> None:
    body = SubscriptionCreate.model_validate(_example())
    assert body.destination == SlackSpec.name
    config = SlackSpec.config(body.config)
    assert config.model_dump(mode="json")["incidents"] is True
    SlackSpec.secrets({}, body.secrets)
    sub = Subscription("acme", body.name, body.destination, body.config, body.filters)
    carried = {TAGGED: {"pii"}, UNTAGGED: {"internal"}}
    dispatcher = Dispatcher(
        _Subscriptions(sub),  # type: ignore[arg-type]
        {"slack": SlackDestination(env=None)},  # type: ignore[arg-type]
        ledger=None,  # type: ignore[arg-type]
        policy=None,  # type: ignore[arg-type]
        asset_tags=lambda tenant, urn: carried[urn],
    )
    assert dispatcher.targets(as_change(incident_event("acme", TAGGED, "inc-1", "opened"))) == [sub]
    assert dispatcher.targets(as_change(incident_event("acme", UNTAGGED, "inc-2", "opened"))) == []
    assert dispatcher.targets(as_change(classification_event("acme", TAGGED, "PII"))) == []
