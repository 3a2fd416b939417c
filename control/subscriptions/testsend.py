"""Test sends of a subscription: the request the admin API publishes, the change the outbound runtime delivers for it,
and the outcome the runtime records for the API to read.

``POST /v1/tenants/{tenant}/subscriptions/{name}/test`` records a ``pending`` outcome, then publishes an
``io.metalake.subscription.test.requested.v1`` event to ``metalake.outbound.tests``: a topic of its own, because a
request to one deployable is not a committed change, and the readers of ``metalake.changes`` (propagation, access, any
other consumer of the contract) have no business with it. The outbound runtime delivers :meth:`SubscriptionTest.change`
(a "tag added" change for a test asset) to that one subscription, once, without its filters, and records
``delivered``, ``skipped`` or ``failed`` with the destination's detail (never a secret).

Outcomes are documents of the delivery ledger's collection (``kind: "test"``, ``_id`` from the tenant and the test
id), written with ``expires_at`` so they go with the ledger's retention (TTL index, or the runtime's pruning pass).
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field
from pymongo.collection import Collection
from pymongo.database import Database

from catalog.changes import Change, StateChange
from control.subscriptions.store import NAME_PATTERN
from metalake.events.envelope import CloudEvent, InvalidEvent, decode_record, new_event
from metalake.expiry import expires_at
from metalake.mongo import Doc, typed_collection

SUBSCRIPTION_TEST_REQUESTED = "io.metalake.subscription.test.requested.v1"
TEST_ASSET = "urn:metalake:metalake:test/subscriptions/test/test"
TEST_SOURCE = "/api/subscriptions/test"
# The delivery ledger's collection (processors.outbound.runtime.ledger writes its steps and anchors there).
DELIVERIES = "deliveries"
Status = Literal["pending", "delivered", "skipped", "failed"]


class SubscriptionTest(BaseModel):
    """One test send: its id (the event id; the API answers with it), the subscription, the tag and who asked."""

    model_config = ConfigDict(frozen=True)

    id: str = Field(default_factory=lambda: str(uuid.uuid4()), min_length=1, max_length=64)
    tenant: str
    subscription: str = Field(pattern=NAME_PATTERN.pattern)
    tag: str
    actor: str = Field(min_length=1, max_length=256)
    time: AwareDatetime = Field(default_factory=lambda: datetime.now(UTC))

    def event(self) -> CloudEvent:
        """The request's record. Raises ``InvalidData`` (from the schema), e.g. for a tag that is no tag name."""
        data = {"subscription": self.subscription, "tag": self.tag, "actor": self.actor}
        return new_event(
            SUBSCRIPTION_TEST_REQUESTED,
            self.tenant,
            data,
            source=TEST_SOURCE,
            subject=self.subscription,
            event_id=self.id,
            time=self.time,
        )

    @classmethod
    def of(cls, event: CloudEvent) -> SubscriptionTest:
        if event.type != SUBSCRIPTION_TEST_REQUESTED:
            raise InvalidEvent(f"ce_type is not {SUBSCRIPTION_TEST_REQUESTED}", "ce_type", event.tenantid)
        data = event.data
        return cls(
            id=event.id,
            tenant=event.tenantid,
            subscription=data["subscription"],
            tag=data["tag"],
            actor=data["actor"],
            time=event.time,
        )

    def change(self) -> Change:
        """What is delivered: the test asset tagged by the requester. Raises ``InvalidData`` for a tag no change the
        pipeline publishes could carry (a test with it would prove nothing)."""
        change_id = f"test-{self.id}"
        state = StateChange(
            id=change_id,
            source=TEST_SOURCE,
            tenant=self.tenant,
            time=self.time,
            table="classifications",
            key={"urn": TEST_ASSET, "tag": self.tag},
            deleted=False,
            version=0,
            event_id=change_id,
            state={"source": "human", "actor": self.actor, "propagate": False},
        )
        return Change.of(state.event())


def decode_subscription_test(
    key: bytes | None, value: bytes | None, headers: Iterable[tuple[str, bytes | None]] | None
) -> SubscriptionTest:
    """Parse and validate one record of ``metalake.outbound.tests``; raises ``InvalidEvent``."""
    return SubscriptionTest.of(decode_record(key, value, headers))


@dataclass(frozen=True)
class TestOutcome:
    """Where a test send is: ``pending`` until the runtime tried it, then the destination's answer."""

    __test__ = False  # not a pytest test class, although its name starts with Test

    id: str
    tenant: str
    subscription: str
    status: Status
    detail: str = ""
    refs: Mapping[str, str] = field(default_factory=dict)
    requested_at: datetime | None = None
    finished_at: datetime | None = None


class OutcomeDoc(TypedDict):
    """A ``test`` document of the ledger's collection: ``TestOutcomes.pending`` inserts it, ``TestOutcomes.finish``
    adds the destination's answer."""

    _id: str
    kind: Literal["test"]
    tenant: str
    subscription: str
    test_id: str
    status: Status
    requested_at: datetime
    expires_at: datetime
    detail: NotRequired[str]
    refs: NotRequired[dict[str, str]]
    finished_at: NotRequired[datetime]


def _outcome_id(tenant: str, test_id: str) -> str:
    return f"test/{tenant}/{test_id}"


def _outcome(doc: OutcomeDoc) -> TestOutcome:
    return TestOutcome(
        id=doc["test_id"],
        tenant=doc["tenant"],
        subscription=doc["subscription"],
        status=doc["status"],
        detail=doc.get("detail") or "",
        refs=dict(doc.get("refs") or {}),
        requested_at=doc.get("requested_at"),
        finished_at=doc.get("finished_at"),
    )


class TestOutcomes:
    """The outcomes of test sends. ``retention``: how long one is kept (the ledger's retention)."""

    __test__ = False

    def __init__(self, database: Database[Doc], retention: timedelta) -> None:
        # The ledger's collection holds other kinds too; this view reads and writes ``kind: "test"`` documents only.
        self._docs: Collection[OutcomeDoc] = typed_collection(database, DELIVERIES, OutcomeDoc)
        self._retention = retention

    def _expiry(self, now: datetime) -> datetime:
        return expires_at(now, self._retention)

    def pending(self, test: SubscriptionTest) -> TestOutcome:
        """Record the request before it is published, so the runtime finds it and a reader never gets a 404."""
        now = datetime.now(UTC)
        doc: OutcomeDoc = {
            "_id": _outcome_id(test.tenant, test.id),
            "kind": "test",
            "tenant": test.tenant,
            "subscription": test.subscription,
            "test_id": test.id,
            "status": "pending",
            "requested_at": test.time,
            "expires_at": self._expiry(now),
        }
        self._docs.insert_one(doc)
        return _outcome(doc)

    def finish(
        self, tenant: str, test_id: str, status: Status, detail: str, refs: Mapping[str, Any] | None = None
    ) -> bool:
        """Record the outcome of a pending test; ``False`` if there is none pending (done already, or never asked
        through the API: a replayed topic delivers nothing)."""
        now = datetime.now(UTC)
        result = self._docs.update_one(
            {"_id": _outcome_id(tenant, test_id), "status": "pending"},
            {
                "$set": {
                    "status": status,
                    "detail": detail[:500],
                    "refs": {str(k): str(v) for k, v in (refs or {}).items()},
                    "finished_at": now,
                    "expires_at": self._expiry(now),
                }
            },
        )
        return result.modified_count > 0

    def get(self, tenant: str, test_id: str) -> TestOutcome | None:
        doc = self._docs.find_one({"_id": _outcome_id(tenant, test_id)})
        return _outcome(doc) if doc is not None else None
