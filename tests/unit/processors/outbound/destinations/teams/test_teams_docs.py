"""The Teams and Freshdesk examples in docs/outbound.md are what the code accepts and sends: the subscription bodies
validate with the specs, the card is the one the runtime builds for that change."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from catalog.changes import STATE_CHANGED, Change
from control.subscriptions.destinations import DestinationSpec
from processors.outbound.destinations.freshdesk.spec import FreshdeskSpec
from processors.outbound.destinations.teams.messages import teams_message
from processors.outbound.destinations.teams.spec import TeamsSpec

DOC = Path(__file__).resolve().parents[6] / "docs" / "outbound.md"
URN = "urn:metalake:postgres:prod/shop/public/customers/email"


def _section(title: str) -> list[Any]:
    text = DOC.read_text("utf-8")
    section = text.split(f"\n## {title}\n", 1)[1].split("\n## ", 1)[0]
    return [json.loads(block) for block in re.findall(r"```json\n(.*?)```", section, re.DOTALL)]


def _valid(spec: type[DestinationSpec], body: dict[str, Any]) -> None:
    assert body["destination"] == spec.name
    spec.config(body["config"])
    spec.secrets({}, body["secrets"])


def test_the_teams_examples_are_what_the_code_takes_and_sends() -> None:
    subscription, card = _section("Microsoft Teams")
    _valid(TeamsSpec, subscription)
    state = {"source": "human", "actor": "jdoe"}
    data = {"table": "classifications", "key": {"urn": URN, "tag": "PII"}, "deleted": False, "state": state}
    change = Change("7d9c0b52-3c1e-5b7a-9f42-1d2e3f4a5b6c", STATE_CHANGED, "acme", data, URN)
    assert card == teams_message(change, subscription["config"]["catalog_url"])


def test_the_freshdesk_example_is_what_the_spec_takes() -> None:
    (subscription,) = _section("Freshdesk")
    _valid(FreshdeskSpec, subscription)
