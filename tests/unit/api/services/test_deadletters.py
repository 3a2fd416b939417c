"""The admin API's dead-letter service over fakes of the DLQ topics, the replay log and Kafka: tenant isolation,
filters and pages, and a replay that publishes once, records refusals and forgets a claim Kafka did not confirm."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest
from pydantic import SecretStr
from pymongo.errors import DuplicateKeyError

from api.problems import Problem
from api.routes.deadletters import dead_letters
from api.schemas.deadletters import DeadLetterPage, DeadLetterView
from api.services.dead_letters.letters import Medium, Scan, StoredLetter
from api.services.dead_letters.replay import Refused, ReplayLog
from api.services.dead_letters.scope import LetterScopes
from api.services.dead_letters.service import DeadLetters, Filters, Listed
from connectors.montecarlo import MonteCarloConnector
from control.connectors.records import ConnectorRecord
from control.connectors.registry import Plugin
from control.erased import urn_hasher
from metalake.kafka import PublishError, RawRecord
from metalake.kafka.dlq import DeadLetter
from ops.settings import Settings
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for
from tenants.registry import TenantRecord, TenantState
from tests._support.runtime_fakes import FakeStore

FIXTURES = Path(__file__).resolve().parents[2] / "connectors" / "montecarlo" / "fixtures"
UNMAPPED = "0c0c0c0c-0000-4000-8000-000000000000"
T0 = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


def _letter(
    tenant: str, offset: int, *, stage: str = "mapping", connector: str = "mc", minutes: int = 0
) -> StoredLetter:
    letter = DeadLetter(
        reason="warehouse not mapped",
        error_class="InvalidPayload" if stage == "mapping" else "PermanentDelivery",
        stage=stage,
        tenant_id=tenant,
        plugin="montecarlo" if stage == "mapping" else "webhook",
        connector=connector if stage == "mapping" else None,
        origin=f"webhook:/webhooks/monte-carlo/{tenant}" if stage == "mapping" else None,
    )
    medium: Medium = "connectors" if stage == "mapping" else "outbound"
    body = (FIXTURES / "mcon_unmapped_warehouse.json").read_bytes()
    return StoredLetter(
        medium, 0, offset, T0 + timedelta(minutes=minutes), b"k", body, (("content-type", b"application/json"),), letter
    )


class FakeTopics:
    def __init__(self, *letters: StoredLetter) -> None:
        self.letters = list(letters)

    def scan(self, tenant: str, media: Any) -> Scan:
        return Scan([s for s in self.letters if s.letter.tenant_id == tenant and s.medium in media], False)

    def get(self, tenant: str, medium: str, partition: int, offset: int) -> StoredLetter | None:
        return next(
            (
                s
                for s in self.letters
                if (s.medium, s.partition, s.offset) == (medium, partition, offset) and s.letter.tenant_id == tenant
            ),
            None,
        )


class FakeReplayDocs:
    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}

    def insert_one(self, doc: dict[str, Any]) -> None:
        if doc["_id"] in self.docs:
            raise DuplicateKeyError("E11000")
        self.docs[doc["_id"]] = dict(doc)

    def find_one(self, query: dict[str, Any]) -> dict[str, Any] | None:
        doc = self.docs.get(query["_id"])
        return dict(doc) if doc else None

    def update_one(self, query: dict[str, Any], update: dict[str, Any]) -> Any:
        doc = self.docs.get(query["_id"])
        ok = doc is not None and all(doc.get(k) == v for k, v in query.items())
        if ok and doc is not None:
            doc.update(update.get("$set", {}))
            for k in update.get("$unset", {}):
                doc.pop(k, None)
        return type("R", (), {"modified_count": int(ok)})()

    def delete_one(self, query: dict[str, Any]) -> None:
        doc = self.docs.get(query["_id"])
        if doc is not None and all(doc.get(k) == v for k, v in query.items()):
            del self.docs[query["_id"]]


class FakeDirectory:
    def names(self, tenant: str) -> TenantNames:
        return names_for(tenant, Path("/tmp/dlq-no-lake"))


class FakeProducer:
    def __init__(self) -> None:
        self.sent: list[RawRecord] = []
        self.fail = False

    def publish_raw(self, records: list[RawRecord]) -> list[Any]:
        if self.fail:
            raise PublishError("broker down", retriable=True)
        self.sent += records
        return []


class FakePublisher:
    def __init__(self) -> None:
        self.directory = FakeDirectory()
        self.producer = FakeProducer()


def _service(*letters: StoredLetter, warehouses: dict[str, Any] | None = None) -> tuple[DeadLetters, FakeStore]:
    store = FakeStore()
    config = {"default_platform": "snowflake", "default_instance": "acme", "warehouses": warehouses or {}}
    for tenant in ("acme", "zeta"):
        store.add(ConnectorRecord(tenant, "mc", "montecarlo", config), "secret")
    replays = ReplayLog(cast(Any, {"dead_letter_replays": FakeReplayDocs()}), 60.0)
    plugins = {"montecarlo": Plugin("montecarlo", MonteCarloConnector)}
    # The stream letters' names point where no _dlq table is: they are tested on a real table elsewhere.
    names = FakeDirectory().names
    service = DeadLetters(
        Settings(), cast(Any, FakeTopics(*letters)), replays, cast(Any, store), cast(Any, None), plugins, names
    )
    return service, store


def test_another_tenants_letter_is_not_found_nor_listed_nor_replayable() -> None:
    service, _ = _service(_letter("acme", 1), _letter("zeta", 2))
    assert [s.id for s, _ in service.page("acme", Filters(), 50, None).letters] == ["connectors-0-1"]
    for call in (
        lambda: service.inspect("acme", "connectors-0-2"),
        lambda: service.replay("acme", "connectors-0-2", "alice", cast(Any, FakePublisher())),
    ):
        with pytest.raises(Problem) as problem:
            call()
        assert problem.value.status == 404 and problem.value.field == "letter_id"


def test_filters_and_pages_newest_first() -> None:
    letters = [_letter("acme", i, minutes=i, connector="mc" if i % 2 else "other") for i in range(5)]
    letters.append(_letter("acme", 9, stage="outbound", minutes=10))
    service, _ = _service(*letters)
    first = service.page("acme", Filters(stage="mapping"), 2, None)
    assert [s.offset for s, _ in first.letters] == [4, 3] and first.resume is not None
    second = service.page("acme", Filters(stage="mapping"), 2, first.resume)
    third = service.page("acme", Filters(stage="mapping"), 2, second.resume)
    assert [s.offset for s, _ in second.letters] == [2, 1] and [s.offset for s, _ in third.letters] == [0]
    assert third.resume is None
    assert [s.offset for s, _ in service.page("acme", Filters(connector="mc"), 50, None).letters] == [3, 1]
    assert [s.medium for s, _ in service.page("acme", Filters(stage="outbound"), 50, None).letters] == ["outbound"]
    since = Filters(since=T0 + timedelta(minutes=3), until=T0 + timedelta(minutes=5))
    assert [s.offset for s, _ in service.page("acme", since, 50, None).letters] == [4, 3]
    assert service.page("acme", Filters(error_class="Nope"), 50, None).letters == []


def test_a_refused_replay_is_recorded_then_replays_once_the_map_is_fixed_and_only_once() -> None:
    service, store = _service(_letter("acme", 1))
    publisher = FakePublisher()
    with pytest.raises(Refused):
        service.replay("acme", "connectors-0-1", "alice", cast(Any, publisher))
    _, replay = service.inspect("acme", "connectors-0-1")
    assert replay is not None and replay.status == "refused" and replay.field and "mcon" in replay.field

    fixed = store.records["acme/mc"]
    warehouses = {UNMAPPED: {"platform": "bigquery", "instance": "analytics"}}
    store.records["acme/mc"] = replace(fixed, config={**fixed.config, "warehouses": warehouses})
    done = service.replay("acme", "connectors-0-1", "bob", cast(Any, publisher))
    assert (done.outcome, done.published, done.replay.status, done.replay.tries) == ("replayed", 1, "replayed", 2)
    [record] = publisher.producer.sent
    assert record.topic == names_for("acme", Path("/tmp/dlq-no-lake")).topic("priority")
    assert done.replay.events == (record.id,)

    again = service.replay("acme", "connectors-0-1", "carol", cast(Any, publisher))
    assert (again.outcome, again.published, again.replay.by) == ("already_replayed", 0, "bob")
    assert len(publisher.producer.sent) == 1


def test_a_replay_kafka_did_not_confirm_is_forgotten_so_the_next_try_publishes() -> None:
    warehouses = {UNMAPPED: {"platform": "bigquery", "instance": "analytics"}}
    service, _ = _service(_letter("acme", 1), warehouses=warehouses)
    publisher = FakePublisher()
    publisher.producer.fail = True
    with pytest.raises(Problem) as problem:
        service.replay("acme", "connectors-0-1", "alice", cast(Any, publisher))
    assert problem.value.status == 503
    assert service.inspect("acme", "connectors-0-1")[1] is None
    publisher.producer.fail = False
    assert service.replay("acme", "connectors-0-1", "alice", cast(Any, publisher)).outcome == "replayed"


def test_every_medium_renders_through_the_api_schemas() -> None:
    stream = replace(_letter("acme", 4), medium="stream", topic_class="bulk")
    for stored in (_letter("acme", 1), _letter("acme", 2, stage="outbound"), stream):
        view = DeadLetterView.of(stored, None, 16_384)
        assert view.id == stored.id and view.medium == stored.medium and view.payload.shown
        assert DeadLetterPage.of(Listed([(stored, None)], False, None), None).items[0].id == stored.id
    assert DeadLetterView.of(stream, None, 16_384).id == "stream-bulk-0-4"


# -- which letters are the tenant's now: its registration's, none naming an erased asset (issue 21, items 7 and 14) --

ERASED = "urn:metalake:postgres:prod/shop/public/customers"
MAPPED = {UNMAPPED: {"platform": "bigquery", "instance": "analytics"}}
# The URN the Monte Carlo letter maps to once its warehouse is mapped (its raw payload spells no URN).
MAPPED_URN = "urn:metalake:bigquery:analytics/analytics/prod/orders"


class FakeFind:
    def __init__(self, docs: list[dict[str, Any]]) -> None:
        self.docs = docs

    def find(self, query: dict[str, Any], projection: Any = None) -> list[dict[str, Any]]:
        return [d for d in self.docs if all(d.get(k) == v for k, v in query.items())]


class FakeRegistry:
    def __init__(self, registered: dict[str, datetime]) -> None:
        self.registered = registered

    def get(self, tenant: str) -> TenantRecord | None:
        at = self.registered.get(tenant)
        if at is None:
            return None
        return TenantRecord(tenant, Tier.POOLED, TenantState.ACTIVE, None, at, at)


def _keyed_settings() -> Settings:
    settings = Settings()
    settings.api.key_encryption_key = SecretStr("a-test-key-encryption-key-of-32b")
    return settings


def _scoped(
    *letters: StoredLetter,
    erased: tuple[tuple[str, bool], ...] = (),
    registered: dict[str, datetime] | None = None,
    warehouses: dict[str, Any] | None = None,
) -> DeadLetters:
    """The service with the route's scope over fakes: ``erased`` (URN, with children) as the erase records them."""
    settings = _keyed_settings()
    hasher = urn_hasher(settings)
    docs = [{"tenant": "acme", "target_hash": hasher.digest(urn), "include_children": kids} for urn, kids in erased]
    database = cast(Any, {"erased_urns": FakeFind(docs), "erasures": FakeFind([])})
    scopes = LetterScopes(database, settings, FakeRegistry(registered or {}))
    service, _ = _service(*letters, warehouses=warehouses)
    return DeadLetters(
        settings,
        service._topics,
        service._replays,
        service._connectors,
        service._subscriptions,
        service._plugins,
        service._names,
        scopes,
    )


def _naming(tenant: str, offset: int, urn_text: str, *, minutes: int = 0) -> StoredLetter:
    """An outbound letter whose change names ``urn_text`` (as JSON writes it, slashes maybe escaped)."""
    value = b'{"type": "io.metalake.asset.upserted.v1", "data": {"urn": "' + urn_text.encode() + b'"}}'
    return replace(_letter(tenant, offset, stage="outbound", minutes=minutes), value=value)


def _not_found(service: DeadLetters, letter_id: str) -> None:
    for call in (
        lambda: service.inspect("acme", letter_id),
        lambda: service.replay("acme", letter_id, "alice", cast(Any, FakePublisher())),
    ):
        with pytest.raises(Problem) as problem:
            call()
        assert problem.value.status == 404 and problem.value.field == "letter_id"


def test_a_letter_naming_an_erased_urn_is_neither_listed_shown_nor_replayable() -> None:
    service = _scoped(
        _naming("acme", 1, ERASED.replace("/", "\\/")),  # JSON may escape the slashes
        _naming("acme", 2, ERASED + "/email"),  # a column of the erased table: erased with it only with children
        _naming("acme", 3, "urn:metalake:postgres:prod/shop/public/orders"),
        erased=((ERASED, False),),
    )
    assert [s.offset for s, _ in service.page("acme", Filters(), 50, None).letters] == [3, 2]
    _not_found(service, "outbound-0-1")
    assert service.inspect("acme", "outbound-0-2")[0].offset == 2


def test_an_erasure_with_children_hides_the_letters_naming_a_child_in_another_spelling() -> None:
    service = _scoped(
        _naming("acme", 1, "urn:metalake:postgres:prod/shop/public/customers/e%2dmail"),
        _naming("acme", 2, "urn:metalake:postgres:prod/shop/public/customers_v2"),  # a lookalike, not a child
        erased=((ERASED, True),),
    )
    assert [s.offset for s, _ in service.page("acme", Filters(), 50, None).letters] == [2]
    _not_found(service, "outbound-0-1")


def test_a_replay_that_would_publish_an_erased_asset_is_refused() -> None:
    # The Monte Carlo letter spells no URN: only once mapped does it name the erased table, so it is listed...
    service = _scoped(_letter("acme", 1), erased=((MAPPED_URN, False),), warehouses=MAPPED)
    assert [s.offset for s, _ in service.page("acme", Filters(), 50, None).letters] == [1]
    publisher = FakePublisher()
    with pytest.raises(Refused) as refused:
        service.replay("acme", "connectors-0-1", "alice", cast(Any, publisher))
    assert "erased" in refused.value.reason and MAPPED_URN not in refused.value.reason
    assert publisher.producer.sent == []
    # ...and without the erasure the same letter replays.
    other = _scoped(_letter("acme", 1), warehouses=MAPPED)
    assert other.replay("acme", "connectors-0-1", "alice", cast(Any, FakePublisher())).outcome == "replayed"


def test_letters_of_an_earlier_registration_of_the_tenant_id_are_not_the_new_tenants() -> None:
    # acme was deleted and registered again at T0 + 30 min: the letters from before are the old tenant's.
    letters = [_letter("acme", 1, minutes=10), _letter("acme", 2, minutes=40), _letter("zeta", 3, minutes=5)]
    service = _scoped(*letters, registered={"acme": T0 + timedelta(minutes=30)}, warehouses=MAPPED)
    assert [s.offset for s, _ in service.page("acme", Filters(), 50, None).letters] == [2]
    _not_found(service, "connectors-0-1")
    assert service.replay("acme", "connectors-0-2", "alice", cast(Any, FakePublisher())).outcome == "replayed"
    # An unregistered tenant id (pooled, as the demo's) has no registration: all its letters are its.
    assert [s.offset for s, _ in service.page("zeta", Filters(), 50, None).letters] == [3]


def test_the_route_scopes_the_service_to_the_registration_and_the_erased_set() -> None:
    ctx = SimpleNamespace(settings=_keyed_settings(), mongo={CONTROL_DATABASE: defaultdict(dict)})
    service = dead_letters(cast(Any, ctx), cast(Any, FakeStore()))
    assert isinstance(service._scope, LetterScopes)
