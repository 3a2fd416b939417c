"""Teams and Freshdesk through the outbound runtime on the real stack, against local stand-ins that check the exact
requests: cards and tickets for tag changes and Monte Carlo incidents, the ledger in FerretDB (a redelivered change
posts no second card and files no second ticket, also across a restart), and the runtime as a process on Kafka."""

from __future__ import annotations

import json
import secrets
import tomllib
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import pytest
from pymongo import MongoClient

from control.subscriptions.destinations import GROUP
from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent
from metalake.kafka import EventProducer
from metalake.net.ssrf import AddressGuard
from ops.settings import Settings
from processors.outbound.destinations.freshdesk.destination import FreshdeskDestination, dedup_tag
from processors.outbound.destinations.teams.destination import TeamsDestination
from processors.outbound.destinations.teams.messages import md
from processors.outbound.runtime.catalog import Catalog, Impact
from processors.outbound.runtime.destination import Destination, DestinationEnv
from processors.outbound.runtime.dispatch import Dispatcher
from processors.outbound.runtime.ledger import Ledger
from processors.outbound.runtime.retry import RetryPolicy
from processors.outbound.runtime.subscriptions import SubscriptionCache
from tenants.naming import CHANGES_TOPIC, CONTROL_DATABASE, names_for
from tests._support.freshdesk_server import FreshdeskServer
from tests._support.itest import wait_for
from tests._support.kafka_tail import mark
from tests._support.outbound_helpers import (
    FRESHDESK_KEY,
    as_change,
    classification_event,
    completed_event,
    freshdesk_sub,
    incident_event,
    outbound_settings,
    teams_sub,
)
from tests._support.outbound_runtime import (
    MAIN_TOPICS,
    RETRY,
    RuntimeProcess,
    caught_up,
    commit_offsets,
    start_groups_at_end,
)
from tests._support.sealing import stack_sealer
from tests._support.teams_server import TeamsServer

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[3]
EMAIL = "urn:metalake:postgres:prod/shop/public/customers/email"
ORDERS = "urn:metalake:snowflake:acme-prod/analytics/public/orders"
DOWNSTREAM = ["urn:metalake:postgres:prod/mart/public/c360/email_hash"]


@pytest.fixture
def servers() -> Iterator[tuple[TeamsServer, FreshdeskServer]]:
    teams, freshdesk = TeamsServer(), FreshdeskServer(FRESHDESK_KEY)
    teams.start()
    freshdesk.start()
    yield teams, freshdesk
    teams.stop()
    freshdesk.stop()


def _dispatcher(settings: Settings, mongo: MongoClient[dict[str, Any]]) -> Dispatcher:
    s = outbound_settings(settings)
    env = DestinationEnv(s, AddressGuard.from_settings(s.outbound.ssrf_allow))
    # Built directly: the shared venv's installed entry points may predate these two destinations.
    destinations: dict[str, Destination] = {"teams": TeamsDestination(env), "freshdesk": FreshdeskDestination(env)}
    control = mongo[CONTROL_DATABASE]
    cache = SubscriptionCache(SubscriptionStore(control, stack_sealer()), 0)
    return Dispatcher(cache, destinations, Ledger(control), RetryPolicy.from_settings(s.outbound))


def _deliver_all(dispatcher: Dispatcher, event: CloudEvent) -> list[str]:
    change = as_change(event)
    return [f"{sub.name}:{dispatcher.deliver(change, sub, 3).status}" for sub in dispatcher.targets(change)]


def test_cards_and_tickets_for_a_tag_and_an_incident_once_each(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    teams, freshdesk = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    teams_sub(store, tenant, teams.webhook_url)
    freshdesk_sub(store, tenant, freshdesk.url)
    dispatcher = _dispatcher(settings, mongo)

    added = classification_event(tenant, EMAIL, "PII")
    assert _deliver_all(dispatcher, added) == ["freshdesk:delivered", "teams:delivered"]
    assert teams.refused == [] and len(teams.cards) == 1
    assert teams.cards[0]["body"][0]["text"] == f"PII tag added to {EMAIL}"
    assert freshdesk.calls() == [("GET", "/api/v2/search/tickets"), ("POST", "/api/v2/tickets")]
    assert dedup_tag(tenant, EMAIL, "pii") in freshdesk.tickets[1]["tags"]

    # Redelivered (the same change id): the ledger in FerretDB has both steps done.
    assert _deliver_all(dispatcher, added) == ["freshdesk:delivered", "teams:delivered"]
    assert len(teams.seen()) == 1 and len(freshdesk.requests) == 2

    # A new dispatcher (a restarted runtime) keeps the ticket from the ledger's anchor: a note, no search.
    dispatcher = _dispatcher(settings, mongo)
    assert _deliver_all(dispatcher, completed_event(tenant, EMAIL, "PII", DOWNSTREAM)) == [
        "freshdesk:delivered",
        "teams:delivered",
    ]
    assert freshdesk.calls()[-1] == ("POST", "/api/v2/tickets/1/notes") and len(freshdesk.tickets) == 1
    assert "propagated to 1 downstream" in teams.cards[1]["body"][0]["text"]

    removed = classification_event(tenant, EMAIL, "PII", deleted=True, version=2)
    assert _deliver_all(dispatcher, removed) == ["freshdesk:delivered", "teams:delivered"]
    assert freshdesk.history[1] == [2, 4] and teams.cards[2]["body"][0]["text"] == f"PII tag removed from {EMAIL}"

    # A Monte Carlo incident: a ticket of its own, resolved with it; a card for each step.
    for status, version in (("opened", 1), ("updated", 2), ("resolved", 3)):
        event = incident_event(tenant, ORDERS, "inc-42", status, version=version)
        assert _deliver_all(dispatcher, event) == ["freshdesk:delivered", "teams:delivered"]
    assert freshdesk.history[2] == [2, 4] and len(freshdesk.notes[2]) == 2  # the update and the resolution
    assert [c["body"][0]["text"] for c in teams.cards[3:]] == [
        f"Monte Carlo incident {verb} on {ORDERS}" for verb in ("opened", "updated", "resolved")
    ]
    assert len(freshdesk.tickets) == 2 and len(teams.cards) == 6 and teams.refused == []


def test_a_tag_freshdesk_does_not_handle_reaches_teams_only(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    teams, freshdesk = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    teams_sub(store, tenant, teams.webhook_url, tags=("internal",))
    freshdesk_sub(store, tenant, freshdesk.url)
    dispatcher = _dispatcher(settings, mongo)
    assert _deliver_all(dispatcher, classification_event(tenant, EMAIL, "internal")) == ["teams:delivered"]
    assert _deliver_all(dispatcher, classification_event(tenant, EMAIL, "PII")) == ["freshdesk:delivered"]
    assert len(teams.cards) == 1 and len(freshdesk.tickets) == 1


def _checkout_entry_points(tmp_path: Path) -> str | None:
    """A dist-info declaring this checkout's destinations the installed metadata lacks, for the runtime process's
    path (the shared venv is an editable install of another checkout). ``None`` once they are installed: a name
    registered twice would disable it."""
    declared = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    installed = {ep.name for ep in entry_points(group=GROUP)}
    missing = {name: value for name, value in declared.items() if name not in installed}
    if not missing:
        return None
    dist = tmp_path / "eps" / "metalake_checkout_destinations-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: metalake-checkout-destinations\nVersion: 0\n")
    lines = [f"[{GROUP}]", *(f"{name} = {value}" for name, value in missing.items())]
    (dist / "entry_points.txt").write_text("\n".join(lines) + "\n")
    return str(dist.parent)


def test_the_runtime_process_posts_cards_and_files_tickets_once(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any, tmp_path: Path
) -> None:
    teams, freshdesk = servers
    store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
    teams_sub(store, tenant, teams.webhook_url)
    freshdesk_sub(store, tenant, freshdesk.url)
    run = secrets.token_hex(4)
    env: dict[str, Any] = {
        "allow_base_url_override": True,
        "ssrf_allow": ["127.0.0.0/8"],
        "subscriptions_ttl_s": 1,
        "backoff_initial_s": 0.05,
        "retry_initial_s": 1,
        "retry_max_s": 3,
        "http_timeout_s": 3,
        "poll_timeout_s": 0.2,
        "session_timeout_ms": 6000,
        "group_id": f"it-teams-{run}",
        "retry_group_id": f"it-teams-retry-{run}",
    }
    start_groups_at_end(settings, {env["group_id"]: MAIN_TOPICS, env["retry_group_id"]: RETRY})
    extra_path = _checkout_entry_points(tmp_path)
    started: list[RuntimeProcess] = []

    def runtime(**overrides: Any) -> RuntimeProcess:
        proc = RuntimeProcess(settings, tmp_path / f"outbound-{len(started)}.log", **{**env, **overrides})
        if extra_path is not None:
            proc.env["PYTHONPATH"] = extra_path
        started.append(proc.start())
        return proc

    try:
        proc = runtime()
        before = mark(settings, CHANGES_TOPIC)
        events = [
            classification_event(tenant, EMAIL, "PII"),
            completed_event(tenant, EMAIL, "PII", DOWNSTREAM),
            incident_event(tenant, EMAIL, "inc-7", "opened"),
            incident_event(tenant, EMAIL, "inc-7", "resolved", version=2),
            classification_event(tenant, EMAIL, "PII", deleted=True, version=2),
        ]
        with EventProducer(settings) as producer:
            producer.publish(events, lambda _: CHANGES_TOPIC)
        wait_for(
            "5 cards and both tickets resolved",
            lambda: (
                (
                    len(teams.cards) == 5
                    and all(h[-1] == 4 for h in freshdesk.history.values())
                    and len(freshdesk.history) == 2
                )
                or None
            ),
            timeout_s=90,
        )
        assert [c["body"][0]["text"] for c in teams.cards] == [
            md(f"PII tag added to {EMAIL}"),
            md(f"PII on {EMAIL} propagated to 1 downstream asset(s): +1 added, -0 removed"),
            md(f"Monte Carlo incident opened on {EMAIL}"),
            md(f"Monte Carlo incident resolved on {EMAIL}"),
            md(f"PII tag removed from {EMAIL}"),
        ]
        assert freshdesk.history == {1: [2, 4], 2: [2, 4]} and teams.refused == []
        assert proc.stop() == 0, proc.log()

        # The same changes again, read by a fresh group from before them: no second card, no second ticket.
        again_group = env["group_id"] + "-again"
        commit_offsets(settings, again_group, CHANGES_TOPIC, before)
        again = runtime(group_id=again_group)
        wait_for("the replay consumed", lambda: caught_up(settings, again_group, CHANGES_TOPIC) or None, timeout_s=90)
        assert again.alive(), again.log()
        assert len(teams.seen()) == 5 and len(freshdesk.tickets) == 2
        assert len(freshdesk.seen("/api/v2/tickets", "POST")) == 2
    finally:
        for proc in started:
            proc.stop()


def test_incidents_on_pii_tagged_assets_only(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    """The ``asset_tags`` filter read from the tenant's projection in FerretDB: a direct tag and a propagated one
    count, a removed one (a tombstone) does not."""
    teams, _ = servers
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    direct, propagated, removed, plain = (f"{ORDERS}_{n}" for n in ("direct", "propagated", "removed", "plain"))
    meta = {"version": 1, "event_id": "e1"}
    db["classifications"].insert_many(
        [
            {"_id": f"{direct}|PII", "urn": direct, "tag": "PII", "deleted": False, "source": "human", **meta},
            {"_id": f"{removed}|PII", "urn": removed, "tag": "PII", "deleted": True, **meta},
        ]
    )
    db["propagated_tags"].insert_one(
        {
            "_id": f"{propagated}|pii|{direct}",
            "urn": propagated,
            "tag": "pii",
            "origin": direct,
            "deleted": False,
            **meta,
        }
    )
    try:
        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        teams_sub(store, tenant, teams.webhook_url, asset_tags=("PII",))
        s = outbound_settings(settings)
        env = DestinationEnv(s, AddressGuard.from_settings(s.outbound.ssrf_allow))
        control = mongo[CONTROL_DATABASE]
        dispatcher = Dispatcher(
            SubscriptionCache(SubscriptionStore(control, stack_sealer()), 0),
            {"teams": TeamsDestination(env)},
            Ledger(control),
            RetryPolicy.from_settings(s.outbound),
            asset_tags=Catalog(mongo, lambda: settings.lake_root).tags,
        )
        delivered = [
            urn
            for n, urn in enumerate((direct, propagated, removed, plain))
            if _deliver_all(dispatcher, incident_event(tenant, urn, f"inc-{n}", "opened")) == ["teams:delivered"]
        ]
        assert delivered == [direct, propagated]
        assert [c["body"][0]["text"] for c in teams.cards] == [
            md(f"Monte Carlo incident opened on {direct}"),
            md(f"Monte Carlo incident opened on {propagated}"),
        ]
    finally:
        mongo.drop_database(db.name)


def test_an_incident_names_owners_and_downstream_impact(
    settings: Settings, mongo: MongoClient[dict[str, Any]], tenant: str, servers: Any
) -> None:
    """The catalog's reads on FerretDB (the asset's owners, a breadth-first walk of live lineage edges, bounded), and
    what Teams and Freshdesk then say about an incident."""
    teams, freshdesk = servers
    db = mongo[names_for(tenant, settings.lake_root).mongo_database]
    mart, c360, report, gone = (f"{ORDERS}_{n}" for n in ("mart", "c360", "report", "gone"))
    meta = {"version": 1, "event_id": "e1"}
    db["assets"].insert_one({"_id": ORDERS, "urn": ORDERS, "owners": ["ana@example.com"], "deleted": False, **meta})
    edges = [
        (ORDERS, mart, False),
        (mart, c360, False),
        (ORDERS, report, False),
        (ORDERS, gone, True),
        (c360, mart, False),
    ]
    db["lineage"].insert_many(
        [{"_id": f"{u}|{d}", "upstream": u, "urn": d, "deleted": deleted, **meta} for u, d, deleted in edges]
    )
    try:
        reader = Catalog(mongo, lambda: settings.lake_root)
        assert reader.impact(tenant, ORDERS) == Impact(("ana@example.com",), (mart, report, c360), truncated=False)
        shallow = Catalog(mongo, lambda: settings.lake_root, max_depth=1).impact(tenant, ORDERS)
        assert shallow == Impact(("ana@example.com",), (mart, report), truncated=True)
        narrow = Catalog(mongo, lambda: settings.lake_root, max_assets=2).impact(tenant, ORDERS)
        assert narrow == Impact(("ana@example.com",), (mart, report), truncated=True)
        assert reader.impact(tenant, gone) == Impact((), (), truncated=False)

        store = SubscriptionStore(mongo[CONTROL_DATABASE], stack_sealer())
        teams_sub(store, tenant, teams.webhook_url)
        freshdesk_sub(store, tenant, freshdesk.url)
        s = outbound_settings(settings)
        env = DestinationEnv(s, AddressGuard.from_settings(s.outbound.ssrf_allow), reader)
        control = mongo[CONTROL_DATABASE]
        dispatcher = Dispatcher(
            SubscriptionCache(SubscriptionStore(control, stack_sealer()), 0),
            {"teams": TeamsDestination(env), "freshdesk": FreshdeskDestination(env)},
            Ledger(control),
            RetryPolicy.from_settings(s.outbound),
        )
        event = incident_event(tenant, ORDERS, "inc-77", "opened")
        assert _deliver_all(dispatcher, event) == ["freshdesk:delivered", "teams:delivered"]
        texts = json.dumps(teams.cards[0])
        assert '"title": "Owners", "value": "ana@example.com"' in texts
        # URNs reach the card escaped as Markdown (issue 21 item 15): as the JSON holds them.
        assert "Downstream impact: 3 asset(s) reached by lineage" in texts and json.dumps(md(c360))[1:-1] in texts
        description = freshdesk.tickets[1]["description"]
        assert "<p>Owners: ana@example.com</p>" in description and f"<li>{report}</li>" in description
    finally:
        mongo.drop_database(db.name)
