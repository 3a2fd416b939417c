"""Replaying dead letters: one replay per letter (the replay log), and what a replay publishes for each stage.

**The replay log**: one document per replayed letter in ``metalake_control.dead_letter_replays``, keyed by tenant
and letter id.

A replay first *claims* its letter with a conditional insert (the ``_id`` is unique): of two concurrent replays of
one letter exactly one inserts; the other reads what the first did. Only the claimant publishes, so a letter
replayed twice is published once. A replay that was refused (its cause is not fixed yet) may be tried again: the
claim then moves the document from ``refused`` back to ``running`` with a compare-and-set on its previous state. A
``running`` claim older than ``dead_letters.replay_claim_s`` (the replaying process died before it recorded the
outcome) may be claimed again; its events may then be published twice, which the events' own ids make harmless for
the connectors' deterministic ids (Monte Carlo incidents) and which the outbound ledger absorbs for deliveries.

**A connector worker's letter** goes through the connector's *current* configuration (:func:`remap`):

- ``stage=mapping`` from a webhook (``origin=webhook:<path>``): the kept body goes to the plugin's ``read`` and
  ``to_events`` with the connector's current config and secrets (e.g. a Monte Carlo warehouse map fixed since), as
  received at the letter's time (the incident's version stays the original delivery's). The signature is not checked
  again: it was checked before the letter was written, and only the worker writes the DLQ topic.
- ``stage=transform``: the kept event is decoded again.

Then, as for a live record, the connector's current transforms and the event check run. The outcome is
all-or-nothing: every event passes (and is published by the caller) or the replay is :class:`Refused` with the
first reason, naming the field (the letter stays, to be replayed once that is fixed too).

**A streaming job's letter** (a ``_dlq`` row of the tenant's event topics) is re-published, its original bytes and
headers, to the topic it came from, but only if it parses now (:func:`metalake.events.envelope.decode_record`, as the
job parses, e.g. once its event type is registered); else the replay is refused with the reason and field
(:func:`stream_record`).

**An outbound letter** goes back to the outbound runtime (:func:`outbound_record`).
A delivery letter (``stage=outbound`` with ``outbound.subscription``) is the original change record. Its replay is
that record published to the outbound retry topic with the retry headers of a first attempt due now, for the one
subscription it failed for: the runtime's retry loop reads the subscription as it is now (destination, config,
secrets), delivers once, and on failure retries or dead-letters again as for any delivery. The delivery ledger keeps
a change delivered at most once per subscription. The replay is refused when the change no longer decodes, or the
subscription is gone or disabled (the runtime would drop it: a replay that cannot deliver is not "replayed").

The retry headers are the outbound runtime's wire contract (``processors.outbound.runtime.retry``; a unit test
reads a record built here with that module).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import ValidationError
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from api.services.dead_letters.letters import StoredLetter
from catalog.changes import InvalidChange, decode_change
from control.connectors.chain import RECORD_ERRORS, Chain, Routed, check
from control.connectors.plugin import (
    ConnectorContext,
    InboundRequest,
    InvalidPayload,
    WebhookConnector,
)
from control.connectors.reasons import safe_reason
from control.connectors.records import ConnectorRecord, ConnectorState
from control.connectors.registry import Plugin
from control.connectors.store import ControlStore
from control.subscriptions.store import SubscriptionStore
from metalake.events import CloudEvent
from metalake.events.envelope import InvalidEvent, decode_record
from metalake.kafka import RawRecord
from metalake.mongo import typed_collection
from metalake.sealing import SealingError
from tenants.naming import TenantNames, retry_topic

COLLECTION = "dead_letter_replays"
Status = Literal["running", "replayed", "refused"]
RETRY_TOPIC = retry_topic("outbound")
_PREFIX = "outbound."


class Refused(Exception):
    """The letter cannot be replayed now: ``reason`` (no payload values) and the ``field`` at fault."""

    def __init__(self, reason: str, field: str, error_class: str = "Refused") -> None:
        super().__init__(reason)
        self.reason, self.field, self.error_class = reason, field, error_class


class ReplayDoc(TypedDict):
    _id: str
    tenant: str
    letter: str
    status: Status
    by: str
    claimed_at: datetime
    finished_at: NotRequired[datetime | None]
    reason: NotRequired[str | None]
    field: NotRequired[str | None]
    events: NotRequired[list[str]]
    tries: NotRequired[int]


@dataclass(frozen=True)
class Replay:
    """A letter's replay as recorded: its status, who asked last, and what it published or why it was refused."""

    letter: str
    status: Status
    by: str
    claimed_at: datetime
    finished_at: datetime | None = None
    reason: str | None = None
    field: str | None = None
    events: tuple[str, ...] = ()
    tries: int = 1


def _aware(value: datetime) -> datetime:
    # BSON dates come back naive (UTC) unless the client is tz-aware.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _replay(doc: ReplayDoc) -> Replay:
    finished = doc.get("finished_at")
    return Replay(
        letter=doc["letter"],
        status=doc["status"],
        by=doc["by"],
        claimed_at=_aware(doc["claimed_at"]),
        finished_at=_aware(finished) if finished is not None else None,
        reason=doc.get("reason"),
        field=doc.get("field"),
        events=tuple(doc.get("events") or ()),
        tries=doc.get("tries", 1),
    )


@dataclass(frozen=True)
class Claim:
    """``won``: this caller replays now; else ``existing`` is the replay that did (or is doing) it."""

    won: bool
    existing: Replay | None = None


class ReplayLog:
    def __init__(self, database: Database[Any], claim_s: float) -> None:
        self._docs: Collection[ReplayDoc] = typed_collection(database, COLLECTION, ReplayDoc)
        self._claim = timedelta(seconds=claim_s)

    @staticmethod
    def _id(tenant: str, letter: str) -> str:
        return f"{tenant}/{letter}"

    def get(self, tenant: str, letter: str) -> Replay | None:
        doc = self._docs.find_one({"_id": self._id(tenant, letter)})
        return _replay(doc) if doc is not None else None

    def claim(self, tenant: str, letter: str, by: str, now: datetime | None = None) -> Claim:
        """Claim the letter's replay for ``by`` (see the module docstring)."""
        now = now or datetime.now(UTC)
        key = self._id(tenant, letter)
        doc: ReplayDoc = {
            "_id": key,
            "tenant": tenant,
            "letter": letter,
            "status": "running",
            "by": by,
            "claimed_at": now,
            "tries": 1,
        }
        try:
            self._docs.insert_one(doc)
            return Claim(True)
        except DuplicateKeyError:
            pass
        found = self._docs.find_one({"_id": key})
        if found is None:  # removed in between (by hand): claim afresh
            return self.claim(tenant, letter, by, now)
        stale = found["status"] == "running" and _aware(found["claimed_at"]) < now - self._claim
        if found["status"] != "refused" and not stale:
            return Claim(False, _replay(found))
        # Compare-and-set on the state read: of two retries of a refused letter, one moves it.
        moved = self._docs.update_one(
            {"_id": key, "status": found["status"], "claimed_at": found["claimed_at"]},
            {
                "$set": {"status": "running", "by": by, "claimed_at": now, "tries": found.get("tries", 1) + 1},
                "$unset": {"reason": "", "field": "", "finished_at": ""},
            },
        )
        if moved.modified_count == 1:
            return Claim(True)
        again = self._docs.find_one({"_id": key})
        return Claim(False, _replay(again) if again is not None else None)

    def finish(  # noqa: PLR0913
        self,
        tenant: str,
        letter: str,
        status: Literal["replayed", "refused"],
        *,
        events: list[str] | None = None,
        reason: str | None = None,
        field: str | None = None,
        now: datetime | None = None,
    ) -> Replay:
        """Record the outcome of the caller's claim."""
        key = self._id(tenant, letter)
        self._docs.update_one(
            {"_id": key},
            {
                "$set": {
                    "status": status,
                    "finished_at": now or datetime.now(UTC),
                    "events": list(events or []),
                    "reason": reason,
                    "field": field,
                }
            },
        )
        doc = self._docs.find_one({"_id": key})
        assert doc is not None  # noqa: S101 - claimed before, never deleted by the code
        return _replay(doc)

    def release(self, tenant: str, letter: str) -> None:
        """Drop a claim whose replay could not run at all (Kafka down): the next try claims afresh."""
        self._docs.delete_one({"_id": self._id(tenant, letter), "status": "running"})


@dataclass(frozen=True)
class Remapped:
    """What the replay would publish now: the routed events, and how many the transforms dropped."""

    routed: list[Routed]
    dropped: int


def _field_of(exc: BaseException) -> str:
    field = getattr(exc, "field", None)
    if isinstance(field, str) and field:
        return field if field.startswith(("data", "ce_", "subject", "content-type")) else f"data/{field}"
    if isinstance(exc, ValidationError) and exc.errors():
        return "data/" + "/".join(str(p) for p in exc.errors()[0]["loc"])
    return "data"


def _webhook_events(
    stored: StoredLetter, record: ConnectorRecord, store: ControlStore, plugins: Mapping[str, Plugin]
) -> list[CloudEvent]:
    if record.type != stored.letter.plugin:
        raise Refused("the connector is now of another type", "connector", "ConnectorTypeChanged")
    if record.state is not ConnectorState.RUNNING:
        raise Refused(f"the connector is {record.state.value}: activate it first", "connector", "ConnectorNotRunning")
    plugin = plugins.get(record.type)
    if plugin is None or plugin.cls is None or not issubclass(plugin.cls, WebhookConnector):
        raise Refused(f"connector type {record.type!r} is not installed here", "plugin", "PluginUnavailable")
    try:
        _, secrets = store.secrets.of(record.tenant, record.name)
    except SealingError:
        raise Refused("the connector's secrets cannot be opened", "connector", "SecretsUnavailable") from None
    values: dict[str, Any] = {**record.config, **secrets}
    try:
        config = plugin.cls.config_model.model_validate(values)
    except ValidationError as exc:
        raise Refused(f"the connector's stored config is invalid: {safe_reason(exc)}", "connector") from None
    connector = plugin.cls(config, ConnectorContext(record.tenant, record.name))
    headers = {k.lower(): v.decode("utf-8", "replace") for k, v in stored.original_headers}
    request = InboundRequest(headers=headers, body=stored.value or b"", received_at=stored.time)
    if request.parsed.error is not None:
        raise Refused("the kept body is not JSON", "body", "MalformedBody")
    try:
        return list(connector.to_events(connector.read(request), request))
    except InvalidPayload as exc:
        raise Refused(safe_reason(exc), exc.field, type(exc).__name__) from None


def remap(stored: StoredLetter, store: ControlStore, plugins: Mapping[str, Plugin]) -> Remapped:
    """The letter's events under the connector's current configuration, or :class:`Refused`."""
    letter = stored.letter
    if letter.tenant_id is None or letter.connector is None:
        raise Refused("the letter names no connector", "connector", "NoConnector")
    record = store.get_connector(letter.tenant_id, letter.connector)
    if record is None:
        raise Refused("the connector no longer exists", "connector", "UnknownConnector")
    if letter.stage == "mapping" and (letter.origin or "").startswith("webhook:"):
        events = _webhook_events(stored, record, store, plugins)
    elif letter.stage == "transform":
        try:
            events = [decode_record(stored.key, stored.value, stored.original_headers)]
        except InvalidEvent as exc:
            raise Refused(exc.reason, exc.field or "data", type(exc).__name__) from None
    else:
        raise Refused(f"letters of stage {letter.stage!r} cannot be replayed", "stage", "NotReplayable")
    chain = Chain.from_specs(record.tenant, record.transforms)
    routed_events: list[Routed] = []
    dropped = 0
    for event in events:
        try:
            routed = chain.run(event)
            if routed is not None:
                routed = replace(routed, event=check(routed.event))
        except RECORD_ERRORS as exc:
            raise Refused(safe_reason(exc), _field_of(exc), type(exc).__name__) from None
        if routed is None:
            dropped += 1
        else:
            routed_events.append(routed)
    return Remapped(routed_events, dropped)


def outbound_record(stored: StoredLetter, subscriptions: SubscriptionStore, now_ms: int | None = None) -> RawRecord:
    """The retry record that redelivers the letter's change to its subscription, or :class:`Refused`."""
    letter = stored.letter
    if letter.stage != "outbound" or not letter.subscription:
        raise Refused("the letter names no subscription to deliver to", "subscription", "NotReplayable")
    original = [(k, v) for k, v in stored.original_headers if not k.startswith(_PREFIX)]
    try:
        change = decode_change(stored.key, stored.value, original)
    except InvalidChange as exc:
        raise Refused(exc.reason, exc.field or "data", type(exc).__name__) from None
    if change.tenant != letter.tenant_id:
        raise Refused("the change is of another tenant", "ce_tenantid", "TenantMismatch")
    sub = subscriptions.get(change.tenant, letter.subscription)
    if sub is None or not sub.enabled:
        raise Refused("the subscription no longer exists or is disabled", "subscription", "UnknownSubscription")
    due = now_ms if now_ms is not None else int(time.time() * 1000)
    headers = [
        *original,
        ("outbound.subscription", sub.name.encode()),
        ("outbound.attempt", b"1"),
        ("outbound.due_ms", str(due).encode()),
        ("outbound.reason", f"replay of {stored.id}".encode()),
    ]
    return RawRecord(RETRY_TOPIC, change.id, stored.key, stored.value, headers)


def stream_record(stored: StoredLetter, names: TenantNames) -> RawRecord:
    """The streaming job's record again, for its input topic, if it parses now; else :class:`Refused`."""
    if stored.medium != "stream" or stored.topic_class is None:
        raise Refused("not a streaming job's letter", "letter_id", "NotReplayable")
    headers = list(stored.headers)
    try:
        event = decode_record(stored.key, stored.value, headers)
    except InvalidEvent as exc:
        raise Refused(exc.reason, exc.field or "data", type(exc).__name__) from None
    if event.tenantid != names.tenant_id:
        raise Refused("the record names another tenant", "ce_tenantid", "TenantMismatch")
    return RawRecord(names.topic(stored.topic_class), event.id, stored.key, stored.value, headers)
