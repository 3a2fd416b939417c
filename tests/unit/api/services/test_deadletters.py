"""The admin API's dead-letter service over fakes of the DLQ topics, the replay log and Kafka: tenant isolation,
filters and pages, and a replay that publishes once, records refusals and forgets a claim Kafka did not confirm."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from pymongo.errors import DuplicateKeyError
from runtime_fakes import FakeStore

from api.problems import Problem
from api.schemas.deadletters import DeadLetterPage, DeadLetterView
from api.services.deadletters import DeadLetters, Filters, Listed
from connectors.montecarlo import MonteCarloConnector
from control.connectors.registry import Plugin
from control.connectors.store import ConnectorRecord
from control.dead_letter_replay import Refused, ReplayLog
from control.dead_letters import Medium, Scan, StoredLetter
from metalake.kafka import PublishError, RawRecord
from metalake.kafka.dlq import DeadLetter
from metalake.settings import Settings
from tenants.naming import TenantNames, names_for

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
