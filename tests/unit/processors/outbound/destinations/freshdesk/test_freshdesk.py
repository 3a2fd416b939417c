"""Freshdesk: ticket texts (HTML, escaped), the spec, which changes it takes, and deliveries to a local API v2
stand-in that checks auth and bodies: one ticket per (asset, tag) or incident, notes, the status change, dedup by
the ticket tag when the ledger has no ticket, an interrupted create recovered, 429 with Retry-After."""

from __future__ import annotations

import base64
from collections.abc import Iterator
from typing import Any, cast

import pytest
from pydantic import SecretStr, ValidationError

from api.problems import Problem
from api.services import subscriptions
from catalog.changes import STATE_CHANGED, Change
from control.subscriptions.filters import Filters
from control.subscriptions.settings import OutboundSettings
from control.subscriptions.store import Subscription, SubscriptionStore
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.common import incident_of
from processors.outbound.destinations.freshdesk.destination import FreshdeskDestination, dedup_tag
from processors.outbound.destinations.freshdesk.messages import incident_description, note, tag_description, tag_subject
from processors.outbound.destinations.freshdesk.spec import FreshdeskSpec
from processors.outbound.destinations.teams.spec import TeamsSpec
from processors.outbound.runtime.catalog import Impact
from processors.outbound.runtime.destination import DestinationEnv, PermanentDelivery, RetryableDelivery
from processors.outbound.runtime.ledger import LedgerScope
from tests._support.fake_http import Reply
from tests._support.freshdesk_server import FreshdeskServer
from tests._support.memory_ledger import MemoryLedger
from tests._support.outbound_helpers import (
    FRESHDESK_KEY,
    as_change,
    classification_event,
    completed_event,
    incident_event,
)

URN = "urn:metalake:postgres:prod/shop/public/customers/email"
DOWN = ["urn:metalake:postgres:prod/mart/public/c360/email_hash"]


def test_texts_are_html_with_every_value_escaped() -> None:
    odd = "urn:metalake:postgres:prod/shop/<script>alert(1)</script>"
    state = {"source": "human", "actor": "jdoe"}
    data = {"table": "classifications", "key": {"urn": odd, "tag": "PII"}, "deleted": False, "state": state}
    change = Change("c1", STATE_CHANGED, "acme", data, odd)
    html = tag_description(change, "https://metalake.example.com")
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert 'href="https://metalake.example.com/v1/tenants/acme/assets?urn=urn%3Ametalake%3Apostgres%3A' in html
    assert tag_subject(change).startswith(f"[PII] {odd}")  # a subject is plain text
    long = as_change(classification_event("acme", "urn:metalake:postgres:prod/" + "u" * 300, "PII"))
    assert len(tag_subject(long)) == 255
    assert "[metalake mld_1]" in note(change, None, "mld_1")


def test_the_spec_validates_and_names_the_field() -> None:
    config = FreshdeskSpec.config({"domain": "acme", "email": "gov@example.com"}).model_dump(mode="json")
    assert config["tags"] == ["PII", "GDPR"] and config["done_status"] == 4 and config["priority"] == 2
    for bad, field in (
        ({"domain": "acme.evil.com", "email": "gov@example.com"}, "domain"),
        ({"domain": "acme", "email": "gov@example.com", "done_status": 3}, "done_status"),
        ({"domain": "acme", "email": "gov@example.com", "ticket_tags": ["x" * 33]}, "ticket_tags"),
        ({"domain": "acme", "email": "not-an-email"}, "email"),
    ):
        with pytest.raises(ValidationError) as raised:
            FreshdeskSpec.config(bad)
        assert raised.value.errors()[0]["loc"][0] == field
    assert FreshdeskSpec.secrets({}, {"api_key": "k"}) == {"api_key": "k"}
    assert FreshdeskSpec.endpoint_fields == ("domain", "base_url")


def _sub(name: str = "fd", **config: Any) -> Subscription:
    values = {"domain": "acme", "email": "governance@example.com", **config}
    return Subscription("acme", name, "freshdesk", values, secrets={"api_key": SecretStr(FRESHDESK_KEY)})


def test_freshdesk_takes_its_tags_and_incidents() -> None:
    fd = FreshdeskDestination(env=None)  # type: ignore[arg-type]
    assert fd.accepts(as_change(classification_event("acme", URN, "pii")), _sub())
    assert not fd.accepts(as_change(classification_event("acme", URN, "internal")), _sub())
    assert fd.accepts(as_change(incident_event("acme", URN, "i", "opened")), _sub())
    assert not fd.accepts(as_change(incident_event("acme", URN, "i", "opened")), _sub(incidents=False))
    assert not fd.accepts(as_change(completed_event("acme", URN, "PII", [])), _sub())


@pytest.fixture
def server() -> Iterator[FreshdeskServer]:
    fd = FreshdeskServer(FRESHDESK_KEY)
    fd.start()
    yield fd
    fd.stop()


class World:
    def __init__(self, server: FreshdeskServer) -> None:
        s = Settings().model_copy(
            update={
                "outbound": OutboundSettings(
                    ssrf_allow=["127.0.0.0/8"], allow_base_url_override=True, http_timeout_s=5.0
                )
            }
        )
        self.fd = FreshdeskDestination(DestinationEnv(s, AddressGuard.from_settings(["127.0.0.0/8"])))
        self.server = server
        self.ledger = MemoryLedger()

    def sub(self, name: str = "fd") -> Subscription:
        return _sub(name, base_url=self.server.url)

    def scope(self, change: Change, name: str = "fd") -> LedgerScope:
        return self.ledger.scope("acme", name, change.id)

    def deliver(self, change: Change, name: str = "fd") -> str:
        return self.fd.deliver(change, self.sub(name), self.scope(change, name)).detail


def test_a_ticket_per_asset_and_tag_noted_then_resolved(server: FreshdeskServer) -> None:
    w = World(server)
    added = as_change(classification_event("acme", URN, "PII"))
    assert w.deliver(added) == "freshdesk ticket created"
    search, create = server.requests
    assert search.headers["Authorization"] == "Basic " + base64.b64encode(f"{FRESHDESK_KEY}:X".encode()).decode()
    tag = dedup_tag("acme", URN, "pii")
    assert search.query["query"] == [f"\"tag:'{tag}' AND (status:2 OR status:3)\""]
    body = create.json()
    assert (create.method, create.path, create.headers["Content-Type"]) == (
        "POST",
        "/api/v2/tickets",
        "application/json",
    )
    assert body["email"] == "governance@example.com" and body["status"] == 2 and body["priority"] == 2
    assert body["tags"] == sorted(["metalake", tag]) and body["subject"].startswith("[PII] ")
    assert f"{URN} was tagged PII by jdoe." in body["description"]

    assert w.deliver(added) == "freshdesk ticket created"  # a redelivery: the ledger's steps are done
    assert len(server.requests) == 2

    assert w.deliver(as_change(completed_event("acme", URN, "PII", DOWN))) == "freshdesk ticket noted"
    assert server.calls()[-1] == ("POST", "/api/v2/tickets/1/notes")
    assert DOWN[0] in server.notes[1][0]["body"] and server.notes[1][0]["private"] is True

    removed = as_change(classification_event("acme", URN, "PII", deleted=True, version=2))
    assert w.deliver(removed) == "freshdesk ticket set to 4"
    assert server.calls()[-2:] == [("POST", "/api/v2/tickets/1/notes"), ("PUT", "/api/v2/tickets/1")]
    assert server.history[1] == [2, 4]
    w.deliver(removed)
    assert server.history[1] == [2, 4] and len(server.notes[1]) == 2

    # Tagged again: the resolved ticket is not reopened, a new one is filed.
    assert w.deliver(as_change(classification_event("acme", URN, "PII", version=3))) == "freshdesk ticket created"
    assert sorted(server.tickets) == [1, 2] and server.tickets[2]["status"] == 2


def test_an_incident_opens_updates_and_resolves_one_ticket(server: FreshdeskServer) -> None:
    w = World(server)
    assert w.deliver(as_change(incident_event("acme", URN, "inc-1", "opened"))) == "freshdesk ticket created"
    ticket = server.tickets[1]
    assert ticket["subject"] == f"[Monte Carlo] Incident on {URN}: Has 42 rows vs. 101 expected"
    assert "https://getmontecarlo.com/incidents/inc-1" in ticket["description"]
    assert dedup_tag("acme", URN, "incident:inc-1") in ticket["tags"]
    updated = as_change(incident_event("acme", URN, "inc-1", "updated", version=2, summary="Now 12 rows"))
    assert w.deliver(updated) == "freshdesk ticket noted"
    assert "Now 12 rows" in server.notes[1][0]["body"] and "severity SEV-2" in server.notes[1][0]["body"]
    assert w.deliver(as_change(incident_event("acme", URN, "inc-1", "resolved", version=3))) == (
        "freshdesk ticket set to 4"
    )
    assert server.history[1] == [2, 4] and len(server.tickets) == 1
    # Another incident on the same asset is another ticket.
    w.deliver(as_change(incident_event("acme", URN, "inc-2", "opened")))
    assert len(server.tickets) == 2


def test_a_resolution_without_a_ticket_is_skipped(server: FreshdeskServer) -> None:
    w = World(server)
    change = as_change(incident_event("acme", URN, "inc-9", "resolved"))
    result = w.fd.deliver(change, w.sub(), w.scope(change))
    assert result.status == "skipped" and server.calls() == [("GET", "/api/v2/search/tickets")]


def test_a_second_subscription_finds_the_open_ticket_by_its_tag(server: FreshdeskServer) -> None:
    w = World(server)
    w.deliver(as_change(classification_event("acme", URN, "PII")), "fd-a")
    assert w.deliver(as_change(classification_event("acme", URN, "PII", version=2)), "fd-b") == "freshdesk ticket noted"
    assert len(server.tickets) == 1 and len(server.notes[1]) == 1


def test_an_interrupted_create_is_recovered_not_repeated(server: FreshdeskServer) -> None:
    w = World(server)
    change = as_change(classification_event("acme", URN, "PII"))
    # The first attempt created the ticket, then died before the ledger recorded it.
    w.deliver(change, "other")
    w.ledger.interrupt("acme", "fd", change.id, "ticket")
    assert w.deliver(change) == "freshdesk ticket created"
    assert len(server.tickets) == 1 and server.notes[1] == []


def test_an_interrupted_note_is_found_by_its_marker(server: FreshdeskServer) -> None:
    w = World(server)
    w.deliver(as_change(classification_event("acme", URN, "PII")))
    done = as_change(completed_event("acme", URN, "PII", DOWN))
    w.deliver(done)
    w.ledger.steps.pop(w.scope(done).key("note"))
    w.ledger.interrupt("acme", "fd", done.id, "note")
    w.deliver(done)
    assert len(server.notes[1]) == 1 and server.calls()[-1] == ("GET", "/api/v2/tickets/1/conversations")


def test_429_carries_retry_after_and_4xx_is_permanent(server: FreshdeskServer) -> None:
    w = World(server)
    change = as_change(classification_event("acme", URN, "PII"))
    server.fail_next("/api/v2/search/tickets", Reply(429, {"message": "slow down"}, {"Retry-After": "7"}))
    with pytest.raises(RetryableDelivery) as limited:
        w.deliver(change)
    assert limited.value.retry_after_s == 7.0
    server.fail_next("/api/v2/tickets", Reply(500, None))
    with pytest.raises(RetryableDelivery):
        w.deliver(change)
    assert w.deliver(change) == "freshdesk ticket created" and len(server.tickets) == 1
    wrong = Subscription("acme", "fd2", "freshdesk", w.sub().config, secrets={"api_key": SecretStr("wrong-key-value")})
    with pytest.raises(PermanentDelivery) as refused:
        w.fd.deliver(change, wrong, w.ledger.scope("acme", "fd2", change.id))
    assert str(refused.value) == "freshdesk answered 401" and "wrong-key" not in str(refused.value)


def test_the_base_url_is_honoured_only_when_overrides_are_on(server: FreshdeskServer) -> None:
    w = World(server)
    strict = FreshdeskDestination(
        DestinationEnv(Settings(), AddressGuard.from_settings([]))  # production: no override
    )
    change = as_change(classification_event("acme", URN, "PII"))
    api = strict._api(strict.config(w.sub()), w.sub())
    assert api.base == "https://acme.freshdesk.com"
    assert w.fd._api(w.fd.config(w.sub()), w.sub()).base == server.url
    assert change.tag == "PII"


def test_the_subscriptions_api_names_the_field_of_a_bad_config_or_secret() -> None:
    # What POST /v1/tenants/{tenant}/subscriptions answers as problem+json (the store is not reached).
    specs = {"freshdesk": FreshdeskSpec, "teams": TeamsSpec}
    store = cast(SubscriptionStore, None)
    cases = [
        ("freshdesk", {"domain": "Acme Corp", "email": "g@example.com"}, {"api_key": SecretStr("k")}, "config/domain"),
        ("freshdesk", {"domain": "acme", "email": "g@example.com"}, {}, "secrets/api_key"),
        (
            "teams",
            {"catalog_url": "not a url"},
            {"webhook_url": SecretStr("https://x.example/w")},
            "config/catalog_url",
        ),
        ("teams", {}, {"webhook_url": SecretStr("gopher://x.example/w?sig=s3cr3t")}, "secrets/webhook_url"),
    ]
    for destination, config, secrets, field in cases:
        with pytest.raises(Problem) as refused:
            subscriptions.create(
                store, specs, "acme", "s", destination, config=config, secrets=secrets, filters=Filters(), enabled=True
            )
        assert (refused.value.status, refused.value.field) == (422, field)
        assert "s3cr3t" not in str(refused.value.detail)


def test_an_incident_ticket_names_owners_and_downstream_impact_escaped() -> None:
    change = as_change(incident_event("acme", URN, "inc-5", "opened"))
    incident = incident_of(change)
    assert incident is not None
    impact = Impact(("<ana>@example.com",), ("urn:metalake:postgres:prod/mart/public/c360/<x>",), truncated=False)
    html = incident_description(change, incident, None, impact)
    assert "<p>Owners: &lt;ana&gt;@example.com</p>" in html
    assert "<p>Downstream impact: 1 asset(s) reached by lineage</p>" in html
    assert "<ul><li>urn:metalake:postgres:prod/mart/public/c360/&lt;x&gt;</li></ul>" in html
    assert "Downstream impact" not in incident_description(change, incident, None)


def test_an_incident_link_that_is_not_http_is_left_out() -> None:
    # The url is Monte Carlo's payload's: only an absolute http(s) URL becomes a link in the ticket.
    change = as_change(incident_event("acme", URN, "inc-9", "opened", url="javascript:alert(1)"))
    incident = incident_of(change)
    assert incident is not None
    assert "javascript:" not in incident_description(change, incident, None)
