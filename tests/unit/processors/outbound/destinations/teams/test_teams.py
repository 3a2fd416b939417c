"""Teams: the Adaptive Card and its envelope, which changes it takes, how Teams' answers are read, and a delivery to
a local Workflows stand-in through the SSRF guard (the card as Teams checks it; a redelivery posts nothing)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

import pytest
from pydantic import SecretStr, ValidationError

from api.problems import Problem
from api.services.subscriptions import merged_secrets
from catalog.changes import STATE_CHANGED, Change
from control.subscriptions.filters import Filters
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.teams.destination import TeamsDestination, classify
from processors.outbound.destinations.teams.messages import CARD_CONTENT_TYPE, teams_card, teams_message
from processors.outbound.destinations.teams.spec import TeamsSpec
from processors.outbound.runtime.catalog import Impact
from processors.outbound.runtime.destination import DestinationEnv, PermanentDelivery, RetryableDelivery
from processors.outbound.runtime.pinned_http import HttpAnswer
from tests._support.memory_ledger import MemoryLedger
from tests._support.outbound_helpers import as_change, classification_event, completed_event, incident_event
from tests._support.scripted_dns import ScriptedResolver
from tests._support.teams_server import TeamsServer

URN = "urn:metalake:postgres:prod/shop/public/customers/email"
DOWN = [f"urn:metalake:postgres:prod/mart/public/t{i}/email" for i in range(12)]
CATALOG = "https://metalake.example.com"


def _facts(card: dict[str, Any]) -> dict[str, str]:
    facts = next(e for e in card["body"] if e["type"] == "FactSet")["facts"]
    return {f["title"]: f["value"] for f in facts}


def test_a_tag_card_names_asset_tag_and_who_and_links_the_asset() -> None:
    change = as_change(classification_event("acme", URN, "PII"))
    message = teams_message(change, CATALOG)
    assert message["type"] == "message" and len(message["attachments"]) == 1
    attachment = message["attachments"][0]
    assert attachment["contentType"] == CARD_CONTENT_TYPE == "application/vnd.microsoft.card.adaptive"
    assert attachment["contentUrl"] is None
    card = attachment["content"]
    assert (card["type"], card["version"]) == ("AdaptiveCard", "1.4")
    assert card["$schema"] == "http://adaptivecards.io/schemas/adaptive-card.json"
    assert card["body"][0]["text"] == f"PII tag added to {URN}" and card["body"][0]["weight"] == "Bolder"
    assert _facts(card) == {"Asset": URN, "Tag": "PII", "Applied by": "jdoe"}
    assert card["actions"] == [
        {
            "type": "Action.OpenUrl",
            "title": "Open in metalake",
            "url": f"{CATALOG}/v1/tenants/acme/assets?urn={quote(URN, safe='')}",
        }
    ]
    assert card["body"][-1]["text"].startswith("classification.added · change ")
    # Without a catalog address there is nothing to link to.
    assert "actions" not in teams_card(change)


def test_a_propagation_card_lists_at_most_ten_newly_reached_assets() -> None:
    card = teams_card(as_change(completed_event("acme", URN, "PII", DOWN)))
    assert card["body"][0]["text"].startswith("PII on ") and "propagated to 12 downstream" in card["body"][0]["text"]
    listed = card["body"][2]["text"]
    assert all(u in listed for u in DOWN[:10]) and DOWN[10] not in listed and "… and 2 more" in listed


def test_an_incident_card_carries_what_monte_carlo_sent_and_both_links() -> None:
    change = as_change(incident_event("acme", URN, "inc-7", "resolved"))
    card = teams_card(change, CATALOG)
    assert card["body"][0]["text"] == f"Monte Carlo incident resolved on {URN}"
    assert _facts(card) == {
        "Asset": URN,
        "Status": "resolved",
        "Incident": "inc-7",
        "Type": "ANOMALIES",
        "Severity": "SEV-2",
        "Owner": "oncall@example.com",
    }
    assert card["body"][2]["text"] == "Has 42 rows vs. 101 expected"
    assert [a["title"] for a in card["actions"]] == ["Open in Monte Carlo", "Open in metalake"]
    assert card["actions"][0]["url"] == "https://getmontecarlo.com/incidents/inc-7"


def test_long_texts_are_cut() -> None:
    change = as_change(incident_event("acme", URN, "inc-8", "opened", summary="x" * 5000))
    assert len(teams_card(change)["body"][2]["text"]) == 2000


def _sub(**config: Any) -> Subscription:
    return Subscription("acme", "t", "teams", config, secrets={"webhook_url": SecretStr("https://x.example/w")})


def test_teams_takes_tag_changes_and_incidents_unless_turned_off() -> None:
    teams = TeamsDestination(env=None)  # type: ignore[arg-type]
    assert teams.accepts(as_change(classification_event("acme", URN, "internal")), _sub())
    assert teams.accepts(as_change(incident_event("acme", URN, "i", "opened")), _sub())
    assert not teams.accepts(as_change(incident_event("acme", URN, "i", "opened")), _sub(incidents=False))
    assert not teams.accepts(as_change(completed_event("acme", URN, "PII", [])), _sub())  # nothing new
    propagated = Change("c", STATE_CHANGED, "acme", {"table": "propagated_tags", "key": {"urn": URN, "tag": "PII"}})
    assert not teams.accepts(propagated, _sub())
    asked = Subscription("acme", "t", "teams", {}, Filters(event_types=("tag.*",)))
    assert teams.accepts(propagated, asked)
    untagged = Change("c", STATE_CHANGED, "acme", {"table": "assets", "key": {"urn": URN}})
    assert not teams.accepts(untagged, _sub())


@pytest.mark.parametrize(
    ("answer", "outcome", "retry_after"),
    [
        (HttpAnswer(202, {}), None, None),
        (HttpAnswer(200, {}, b"1"), None, None),
        (HttpAnswer(429, {"retry-after": "7"}), RetryableDelivery, 7.0),
        (HttpAnswer(503, {}), RetryableDelivery, None),
        (
            HttpAnswer(
                200,
                {},
                b"Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP "
                b"error 429 with ContextId tcid=0",
            ),
            RetryableDelivery,
            1.0,
        ),
        (HttpAnswer(200, {}, b"Webhook message delivery failed with error: Bad payload"), PermanentDelivery, None),
        (HttpAnswer(302, {"location": "http://169.254.169.254/"}), PermanentDelivery, None),
        (HttpAnswer(400, {}), PermanentDelivery, None),
        (HttpAnswer(404, {}), PermanentDelivery, None),
    ],
)
def test_answers_are_read_as_teams_means_them(answer: HttpAnswer, outcome: Any, retry_after: float | None) -> None:
    if outcome is None:
        classify(answer)
        return
    with pytest.raises(outcome) as raised:
        classify(answer)
    if retry_after is not None:
        assert raised.value.retry_after_s == retry_after


def test_the_webhook_url_is_a_secret_validated_without_being_quoted() -> None:
    assert TeamsSpec.secrets({}, {"webhook_url": "https://prod-1.westeurope.logic.azure.com/w?sig=abc"}) == {
        "webhook_url": "https://prod-1.westeurope.logic.azure.com/w?sig=abc"
    }
    for bad in ("ftp://files.example.com/x?sig=topsecret", "https://user:topsecret@x.example/w"):
        with pytest.raises(ValidationError) as raised:
            TeamsSpec.secrets({}, {"webhook_url": bad})
        assert "topsecret" not in json.dumps(
            raised.value.errors(include_input=False, include_url=False, include_context=False)
        )
    assert TeamsSpec.config({}).model_dump(mode="json") == {"catalog_url": None, "incidents": True}
    with pytest.raises(ValidationError):
        TeamsSpec.config({"webhook_url": "https://x.example/w"})  # a secret, not configuration


@pytest.fixture
def server() -> Iterator[TeamsServer]:
    teams = TeamsServer()
    teams.start()
    yield teams
    teams.stop()


def _destination(settings: Settings, allow: list[str]) -> TeamsDestination:
    s = settings.model_copy(update={"outbound": OutboundSettings(ssrf_allow=allow, http_timeout_s=5.0)})
    return TeamsDestination(DestinationEnv(s, AddressGuard.from_settings(allow)))


def test_a_card_reaches_the_workflow_once(server: TeamsServer) -> None:
    teams = _destination(Settings(), ["127.0.0.0/8"])
    sub = Subscription("acme", "t", "teams", {}, secrets={"webhook_url": SecretStr(server.webhook_url)})
    ledger = MemoryLedger()
    change = as_change(classification_event("acme", URN, "PII"))
    assert teams.deliver(change, sub, ledger.scope("acme", "t", change.id)).detail == "teams 202"
    assert server.refused == [] and len(server.cards) == 1
    assert server.cards[0]["body"][0]["text"] == f"PII tag added to {URN}"
    # A redelivery of the same change: the ledger's step is done, nothing is posted.
    teams.deliver(change, sub, ledger.scope("acme", "t", change.id))
    assert len(server.seen()) == 1


def test_a_legacy_connector_url_works_too() -> None:
    legacy = TeamsServer(legacy=True)
    legacy.start()
    try:
        teams = _destination(Settings(), ["127.0.0.0/8"])
        sub = Subscription("acme", "t", "teams", {}, secrets={"webhook_url": SecretStr(legacy.webhook_url)})
        change = as_change(incident_event("acme", URN, "inc-1", "opened"))
        assert teams.deliver(change, sub, MemoryLedger().scope("acme", "t", change.id)).detail == "teams 200"
        assert len(legacy.cards) == 1
    finally:
        legacy.stop()


def test_the_ssrf_guard_refuses_loopback_without_naming_the_url(server: TeamsServer) -> None:
    teams = _destination(Settings(), [])
    sub = Subscription("acme", "t", "teams", {}, secrets={"webhook_url": SecretStr(server.webhook_url)})
    change = as_change(classification_event("acme", URN, "PII"))
    with pytest.raises(PermanentDelivery) as refused:
        teams.deliver(change, sub, MemoryLedger().scope("acme", "t", change.id))
    assert "loopback" in str(refused.value) and "sig" not in str(refused.value) and server.seen() == []


def test_incidents_are_narrowed_by_asset_patterns_and_kinds_not_by_tags() -> None:
    incident = as_change(incident_event("acme", URN, "inc-3", "opened"))
    assert Filters(assets=("urn:metalake:postgres:prod/shop/*",), event_types=("incidents.*",)).matches(incident)
    assert not Filters(assets=("urn:metalake:postgres:prod/mart/*",)).matches(incident)
    assert not Filters(tags=("PII",)).matches(incident)
    assert not Filters(event_types=("incidents.*",)).matches(as_change(classification_event("acme", URN, "PII")))


def test_an_incident_card_shows_owners_and_downstream_impact() -> None:
    change = as_change(incident_event("acme", URN, "inc-9", "opened"))
    impact = Impact(("ana@example.com", "data-eng"), tuple(DOWN), truncated=True)
    body = teams_card(change, None, impact)["body"]
    owners = next(e for e in body if e["type"] == "FactSet" and e["facts"][0]["title"] == "Owners")
    assert owners["facts"] == [{"title": "Owners", "value": "ana@example.com, data-eng"}]
    reach = body[body.index(owners) + 1]["text"]
    assert reach.startswith("Downstream impact: 12+ asset(s) reached by lineage\n\n- ")
    assert all(u in reach for u in DOWN[:10]) and DOWN[10] not in reach and "… and 2+ more" in reach
    quiet = teams_card(change, None, Impact((), (), truncated=False))["body"]
    texts = [e.get("text") for e in quiet if e["type"] == "TextBlock"]
    assert texts[2] == "Downstream impact: 0 asset(s) reached by lineage"
    facts = [f for e in quiet if e["type"] == "FactSet" for f in e["facts"]]
    assert {"title": "Owners", "value": "none recorded"} in facts


def test_an_incident_link_that_is_not_http_is_left_out() -> None:
    # The url is Monte Carlo's payload's: a javascript: or relative one must not become a button.
    change = as_change(incident_event("acme", URN, "inc-9", "opened", url="javascript:alert(1)"))
    actions = teams_card(change, CATALOG).get("actions", [])
    assert [a["title"] for a in actions] == ["Open in metalake"]
    assert all(a["title"] != "Open in Monte Carlo" for a in actions)


@pytest.mark.parametrize(
    ("url", "words"),
    [
        ("http://prod-1.westeurope.logic.azure.com/w?sig=topsecret", "must be https: plain http would send"),
        ("http", "must be an https URL with a host"),  # too short: said in words, not "at least 12 items"
        ("https://" + "a" * 2100 + "?sig=topsecret", "at most 2048 characters"),
    ],
)
def test_a_plain_http_or_malformed_url_is_refused_in_words(url: str, words: str) -> None:
    with pytest.raises(Problem) as refused:
        merged_secrets(TeamsSpec, {}, {"webhook_url": SecretStr(url)})
    problem = refused.value
    assert (problem.status, problem.field) == (422, "secrets/webhook_url")
    assert words in problem.detail and "items" not in problem.detail and "topsecret" not in problem.detail


def test_plain_http_is_accepted_only_for_a_loopback_test_receiver(server: TeamsServer) -> None:
    assert TeamsSpec.secrets({}, {"webhook_url": server.webhook_url}) == {"webhook_url": server.webhook_url}


def test_a_stored_plain_http_url_is_never_posted_to_a_public_address() -> None:
    # A subscription stored before https was required: the runtime refuses before connecting (no network here, so a
    # connection attempt would end as a retryable failure instead).
    guard = AddressGuard.from_settings([], ScriptedResolver(teams_test=["93.184.216.34"]))
    teams = TeamsDestination(DestinationEnv(Settings(), guard))
    url = "http://teams.test/workflows/x?sig=topsecret"
    sub = Subscription("acme", "t", "teams", {}, secrets={"webhook_url": SecretStr(url)})
    change = as_change(classification_event("acme", URN, "PII"))
    with pytest.raises(PermanentDelivery) as refused:
        teams.deliver(change, sub, MemoryLedger().scope("acme", "t", change.id))
    assert "must be https" in str(refused.value) and "topsecret" not in str(refused.value)
