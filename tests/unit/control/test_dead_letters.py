"""Dead letters in the control layer: ids, what is shown of a letter, the replay log's claims, and what a replay
publishes for a connector's letter (the connector's current mapping and transforms) and an outbound one."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest
from pydantic import SecretStr
from pymongo.errors import DuplicateKeyError

from api.services.dead_letters.letters import (
    StoredLetter,
    StreamDeadLetters,
    letter_id,
    parse_letter_id,
    parse_stream_letter_id,
)
from api.services.dead_letters.replay import RETRY_TOPIC, Refused, ReplayLog, outbound_record, remap, stream_record
from api.services.dead_letters.view import REDACTED, payload_view, shown_headers
from catalog.changes import decode_change
from connectors.montecarlo import MonteCarloConnector
from control.connectors.records import ConnectorRecord, ConnectorState
from control.connectors.registry import Plugin
from control.connectors.transforms import RenameSpec
from control.subscriptions.store import Subscription
from metalake.events import new_event
from metalake.events.envelope import decode_record
from metalake.kafka.dlq import DeadLetter, dead_letter_record
from metalake.urn import asset_urn
from ops.settings import Settings
from processors.outbound.runtime.retry import read_retry_info
from tenants.naming import names_for, tenant_bucket
from tests._support.outbound_helpers import classification_event
from tests._support.runtime_fakes import FakeStore

FIXTURES = Path(__file__).resolve().parents[1] / "connectors" / "montecarlo" / "fixtures"
UNMAPPED = "0c0c0c0c-0000-4000-8000-000000000000"
AT = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
URN = asset_urn("pg", "prod", "shop", "public", "orders")


def _stored(letter: DeadLetter, value: bytes | None, headers: list[tuple[str, bytes]], medium: Any = "connectors"):
    record = dead_letter_record("t", "x", b"acme:mc", value, headers, letter)
    return StoredLetter(medium, 0, 7, AT, record.key, record.value, tuple(record.headers), letter)


# -- ids ------------------------------------------------------------------------------------------------------------


def test_letter_ids_round_trip_and_refuse_anything_else() -> None:
    assert parse_letter_id(letter_id("outbound", 3, 42)) == ("outbound", 3, 42)
    for bad in ("stream-0-1", "connectors-0", "connectors-a-1", "connectors-0-1/../x", "connectors--1-2"):
        assert parse_letter_id(bad) is None
    assert parse_stream_letter_id("stream-bulk-2-9") == ("bulk", 2, 9)
    assert parse_stream_letter_id("stream-other-2-9") is None and parse_stream_letter_id("connectors-0-1") is None


# -- what is shown --------------------------------------------------------------------------------------------------


def test_payload_keys_naming_secrets_and_credential_like_strings_are_redacted() -> None:
    body = {
        "payload": {"table_name": "orders", "webhook_secret": "s3cr3t", "nested": [{"apiKey": 1, "note": "fine"}]},
        "auth": "Bearer abc.def",
        "jwt": "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiJ4In0.c2ln",
        "slack": "post with xoxb-1234567890-abcdef please",
        "key": "mlk_0123456789abcdef",
        "dsn_like": "postgres://user:pw@db:5432/x",
        "Authorization": {"anything": "at all"},
    }
    view = payload_view(json.dumps(body).encode(), 10_000)
    assert view.shown and view.value == {
        "payload": {
            "table_name": "orders",
            "webhook_secret": REDACTED,
            "nested": [{"apiKey": REDACTED, "note": "fine"}],
        },
        "auth": REDACTED,
        "jwt": REDACTED,
        "slack": REDACTED,
        "key": REDACTED,
        "dsn_like": REDACTED,
        "Authorization": REDACTED,
    }
    assert "s3cr3t" not in json.dumps(view.value)


def test_a_payload_that_is_not_json_or_too_big_is_shown_by_size_and_hash_only() -> None:
    text = payload_view(b"token=abc&signature=def", 10_000)
    assert not text.shown and text.value is None and text.size == 23 and text.sha256 and "not JSON" in (text.note or "")
    big = payload_view(json.dumps({"a": "x" * 100}).encode(), 50)
    assert not big.shown and big.value is None and "larger than 50" in (big.note or "")
    assert not payload_view(None, 10).shown


def test_only_allow_listed_headers_are_shown_never_a_signature() -> None:
    shown, hidden = shown_headers(
        [("content-type", b"application/json"), ("x-mcd-signature", b"abc"), ("ce_type", b"t"), ("authorization", b"x")]
    )
    assert shown == {"content-type": "application/json", "ce_type": "t"} and hidden == 2


# -- the replay log -------------------------------------------------------------------------------------------------


class FakeReplays:
    """The part of a pymongo collection the replay log uses, with a unique ``_id`` like MongoDB's."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}

    def insert_one(self, doc: dict[str, Any]) -> None:
        if doc["_id"] in self.docs:
            raise DuplicateKeyError("E11000")
        self.docs[doc["_id"]] = dict(doc)

    def find_one(self, query: dict[str, Any]) -> dict[str, Any] | None:
        doc = self.docs.get(query["_id"])
        return dict(doc) if doc is not None else None

    def update_one(self, query: dict[str, Any], update: dict[str, Any]) -> Any:
        doc = self.docs.get(query["_id"])
        matches = doc is not None and all(doc.get(k) == v for k, v in query.items())
        if matches and doc is not None:
            doc.update(update.get("$set", {}))
            for k in update.get("$unset", {}):
                doc.pop(k, None)
        return type("Result", (), {"modified_count": 1 if matches else 0})()

    def delete_one(self, query: dict[str, Any]) -> None:
        doc = self.docs.get(query["_id"])
        if doc is not None and all(doc.get(k) == v for k, v in query.items()):
            del self.docs[query["_id"]]


def _log(claim_s: float = 60.0) -> tuple[ReplayLog, FakeReplays]:
    docs = FakeReplays()
    return ReplayLog(cast(Any, {"dead_letter_replays": docs}), claim_s), docs


def test_a_replayed_letter_is_claimed_once() -> None:
    log, _ = _log()
    assert log.claim("acme", "connectors-0-7", "alice").won
    log.finish("acme", "connectors-0-7", "replayed", events=["e1"])
    again = log.claim("acme", "connectors-0-7", "bob")
    assert not again.won and again.existing is not None
    assert (again.existing.status, again.existing.by, again.existing.events) == ("replayed", "alice", ("e1",))
    # Another tenant's letter of the same id is its own.
    assert log.claim("other", "connectors-0-7", "carol").won


def test_a_running_claim_is_not_taken_until_it_is_stale() -> None:
    log, _ = _log(claim_s=60.0)
    assert log.claim("acme", "outbound-1-2", "alice", now=AT).won
    busy = log.claim("acme", "outbound-1-2", "bob", now=AT + timedelta(seconds=30))
    assert not busy.won and busy.existing is not None and busy.existing.status == "running"
    assert log.claim("acme", "outbound-1-2", "bob", now=AT + timedelta(seconds=61)).won


def test_a_refused_letter_may_be_replayed_again_and_counts_its_tries() -> None:
    log, docs = _log()
    assert log.claim("acme", "connectors-0-7", "alice").won
    refused = log.finish("acme", "connectors-0-7", "refused", reason="not mapped", field="warehouse_uuid")
    assert (refused.status, refused.field) == ("refused", "warehouse_uuid")
    assert log.claim("acme", "connectors-0-7", "bob").won
    doc = docs.docs["acme/connectors-0-7"]
    assert (doc["status"], doc["by"], doc["tries"], doc.get("reason")) == ("running", "bob", 2, None)
    log.release("acme", "connectors-0-7")
    assert log.get("acme", "connectors-0-7") is None


# -- a connector's letter, replayed through its current configuration ------------------------------------------------


def _mc_world(warehouses: dict[str, Any]) -> tuple[FakeStore, dict[str, Plugin]]:
    store = FakeStore()
    config = {"default_platform": "snowflake", "default_instance": "acme", "warehouses": warehouses}
    store.add(ConnectorRecord("acme", "mc", "montecarlo", config), "secret")
    return store, {"montecarlo": Plugin("montecarlo", MonteCarloConnector)}


def _mc_letter() -> StoredLetter:
    letter = DeadLetter(
        reason="warehouse not mapped",
        error_class="InvalidPayload",
        stage="mapping",
        tenant_id="acme",
        plugin="montecarlo",
        connector="mc",
        origin="webhook:/webhooks/monte-carlo/acme",
        field="payload/event_list/0/mcon",
    )
    body = (FIXTURES / "mcon_unmapped_warehouse.json").read_bytes()
    return _stored(letter, body, [("content-type", b"application/json")])


def test_an_unmapped_warehouse_is_refused_until_the_map_names_it_then_maps_as_received() -> None:
    store, plugins = _mc_world({})
    with pytest.raises(Refused) as refused:
        remap(_mc_letter(), cast(Any, store), plugins)
    assert refused.value.error_class == "InvalidPayload" and "mcon" in refused.value.field
    assert UNMAPPED not in refused.value.reason

    store, plugins = _mc_world({UNMAPPED: {"platform": "bigquery", "instance": "analytics"}})
    remapped = remap(_mc_letter(), cast(Any, store), plugins)
    [routed] = remapped.routed
    assert routed.event.type == "com.montecarlodata.incident.opened.v1"
    assert routed.event.subject == "urn:metalake:bigquery:analytics/analytics/prod/orders"
    assert routed.event.tenantid == "acme" and routed.event.time == AT  # as received: the letter's time
    # Deterministic: the same letter maps to the same event id (a second publish would be the same event).
    assert remap(_mc_letter(), cast(Any, store), plugins).routed[0].event.id == routed.event.id


def test_a_paused_or_deleted_connector_refuses_the_replay() -> None:
    store, plugins = _mc_world({UNMAPPED: {"platform": "bigquery", "instance": "analytics"}})
    store.set_state("acme", "mc", ConnectorState.PAUSED)
    with pytest.raises(Refused) as paused:
        remap(_mc_letter(), cast(Any, store), plugins)
    assert paused.value.field == "connector" and "PAUSED" in paused.value.reason
    with pytest.raises(Refused) as gone:
        remap(_mc_letter(), cast(Any, FakeStore()), plugins)
    assert gone.value.error_class == "UnknownConnector"


def test_a_transform_letter_runs_through_the_current_transforms() -> None:
    event = new_event(
        "io.metalake.asset.upserted.v1",
        "acme",
        {"urn": URN, "version": 1, "kind": "table", "name": "orders", "description": "d"},
        source="/connectors/acme/pg",
    )
    letter = DeadLetter(
        reason="rename: data/name already exists",
        error_class="TransformError",
        stage="transform",
        tenant_id="acme",
        plugin="postgres",
        connector="pg",
        origin="source:acme/pg/x",
    )
    stored = _stored(letter, event.value(), list(event.headers()))
    store = FakeStore()
    bad = RenameSpec.model_validate({"type": "rename", "from": "description", "to": "name"})
    store.add(ConnectorRecord("acme", "pg", "postgres", {}, transforms=[bad]))
    with pytest.raises(Refused) as refused:
        remap(stored, cast(Any, store), {})
    assert refused.value.error_class == "TransformError" and refused.value.field == "data/name"
    store.add(ConnectorRecord("acme", "pg", "postgres", {}))  # the transform fixed (removed)
    [routed] = remap(stored, cast(Any, store), {}).routed
    assert routed.event.id == event.id and routed.event.data == event.data


# -- an outbound letter, handed back to the outbound runtime ---------------------------------------------------------


class FakeSubscriptions:
    def __init__(self, *subs: Subscription) -> None:
        self.subs = {(s.tenant, s.name): s for s in subs}

    def get(self, tenant: str, name: str) -> Subscription | None:
        return self.subs.get((tenant, name))


def _change_letter(subscription: str | None = "ops") -> StoredLetter:
    change = classification_event("acme", URN, "pii")
    letter = DeadLetter(
        reason="webhook answered 410",
        error_class="PermanentDelivery",
        stage="outbound",
        tenant_id="acme",
        plugin="webhook",
        subscription=subscription,
        origin_topic="metalake.changes",
        origin_partition=0,
        origin_offset=3,
    )
    headers = [*change.headers(), ("outbound.attempt", b"4")]
    record = dead_letter_record("metalake.outbound.dlq", change.id, b"acme", change.value(), headers, letter)
    return StoredLetter("outbound", 1, 9, AT, record.key, record.value, tuple(record.headers), letter)


def test_an_outbound_letter_becomes_a_due_retry_the_runtime_reads() -> None:
    subs = FakeSubscriptions(Subscription("acme", "ops", "webhook", {"url": "https://example.com/h"}))
    record = outbound_record(_change_letter(), cast(Any, subs), now_ms=1234)
    assert record.topic == RETRY_TOPIC == "metalake.outbound.retry"
    info = read_retry_info(record.headers)  # the outbound runtime's own reader
    assert info is not None and (info.subscription, info.attempt, info.due_ms) == ("ops", 1, 1234)
    change = decode_change(record.key, record.value, record.headers)
    assert change.tenant == "acme" and change.asset == URN and change.tag == "pii"
    assert [k for k, _ in record.headers].count("outbound.attempt") == 1  # the letter's old retry state is gone
    assert not any(k.startswith("error.") or k == "stage" for k, _ in record.headers)


def test_an_outbound_letter_without_a_live_subscription_is_refused() -> None:
    with pytest.raises(Refused) as gone:
        outbound_record(_change_letter(), cast(Any, FakeSubscriptions()))
    assert gone.value.field == "subscription"
    disabled = Subscription("acme", "ops", "webhook", {}, enabled=False)
    with pytest.raises(Refused):
        outbound_record(_change_letter(), cast(Any, FakeSubscriptions(disabled)))
    with pytest.raises(Refused) as undecodable:
        outbound_record(_change_letter(subscription=None), cast(Any, FakeSubscriptions()))
    assert undecodable.value.error_class == "NotReplayable"


def test_secrets_of_the_connector_are_not_needed_to_read_a_letter() -> None:
    # The replay uses the connector's config secrets, never its signing secrets (the letter is not verified again).
    store, plugins = _mc_world({UNMAPPED: {"platform": "bigquery", "instance": "analytics"}})
    store.secrets.signing["acme/mc"] = [SecretStr("rotated-since")]
    assert remap(_mc_letter(), cast(Any, store), plugins).routed


# -- the streaming job's _dlq table ----------------------------------------------------------------------------------


def _dlq_rows(root: Path, rows: list[dict[str, Any]]) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    schema = pa.schema(
        [
            ("tenant_id", pa.string()),
            ("tenant_bucket", pa.int32()),
            ("reason", pa.string()),
            ("field", pa.string()),
            ("raw_key", pa.binary()),
            ("raw_value", pa.binary()),
            ("raw_headers", pa.string()),
            ("kafka_topic", pa.string()),
            ("kafka_partition", pa.int32()),
            ("kafka_offset", pa.int64()),
            ("kafka_time", pa.timestamp("us", tz="UTC")),
            ("ingested_at", pa.timestamp("us", tz="UTC")),
        ]
    )
    path = root / "_pooled" / "_dlq"
    path.mkdir(parents=True, exist_ok=True)
    write_deltalake(str(path), pa.Table.from_pylist(rows, schema=schema), mode="append")


def _row(
    tenant: str, offset: int, event: Any, *, minutes: int, topic: str = "metalake.events.priority"
) -> dict[str, Any]:
    return {
        "tenant_id": tenant,
        "tenant_bucket": tenant_bucket(tenant),
        "reason": "data/(root): 'version' is a required property",
        "field": "data/(root)",
        "raw_key": event.key,
        "raw_value": event.value(),
        "raw_headers": json.dumps({k: v.decode() for k, v in event.headers()}),
        "kafka_topic": topic,
        "kafka_partition": 0,
        "kafka_offset": offset,
        "kafka_time": AT,
        "ingested_at": AT + timedelta(minutes=minutes),
    }


def test_stream_letters_are_the_tenants_rows_of_its_topics_newest_first_and_replay_only_if_they_parse(
    tmp_path: Path,
) -> None:
    good = new_event(
        "io.metalake.asset.upserted.v1",
        "acme",
        {"urn": URN, "version": 1, "kind": "table", "name": "orders"},
        source="/tests",
    )
    bad = good.model_copy(update={"data": {"urn": URN, "kind": "table", "name": "orders"}})
    zeta = new_event(
        "io.metalake.asset.upserted.v1", "zeta", {"urn": URN, "version": 1, "kind": "table", "name": "o"}, source="/t"
    )
    _dlq_rows(
        tmp_path,
        [
            _row("acme", 5, bad, minutes=1),
            _row("acme", 5, bad, minutes=1),  # the job appends at least once
            _row("acme", 9, good, minutes=2),
            _row("acme", 11, good, minutes=3, topic="metalake.changes"),  # not a record of its event topics
            _row("zeta", 7, zeta, minutes=4),
        ],
    )
    settings = Settings()
    names = names_for("acme", tmp_path)
    stream = StreamDeadLetters(settings, names)
    scan = stream.scan()
    assert [s.id for s in scan.letters] == ["stream-priority-0-9", "stream-priority-0-5"] and not scan.truncated
    older = scan.letters[1]
    assert (older.letter.stage, older.letter.field, older.letter.tenant_id) == ("stream", "data/(root)", "acme")
    assert stream.get("priority", 0, 7) is None  # zeta's row, asked for by acme
    assert StreamDeadLetters(settings, names_for("zeta", tmp_path)).get("priority", 0, 7) is not None

    with pytest.raises(Refused) as refused:
        stream_record(older, names)
    assert refused.value.field == "data/(root)"
    record = stream_record(scan.letters[0], names)
    assert (record.topic, record.key, record.value, record.id) == (
        "metalake.events.priority",
        good.key,
        good.value(),
        good.id,
    )
    assert decode_record(record.key, record.value, record.headers).id == good.id
    settings.dead_letters.scan_max_records = 1
    assert StreamDeadLetters(settings, names).scan().truncated
