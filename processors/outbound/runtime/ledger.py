"""The delivery ledger (``metalake_control.deliveries``): what was sent where, keyed by an idempotency key.

Two kinds of documents, each written with single-document operations only (FerretDB):

- ``step``: one external side effect of one delivery, ``_id`` = the idempotency key derived from (tenant,
  subscription, change id, operation). :meth:`LedgerScope.begin` records ``in_flight`` *before* the call and returns
  what an earlier attempt left; :meth:`LedgerScope.done` records ``done`` with the result (Slack channel + ts, Jira
  key) *after* it. A ``done`` step is never repeated. An ``in_flight`` one means an earlier attempt died between
  the call and the record: the destination reconciles (Slack looks for the message's dedup key in the channel, Jira
  searches by label or comment marker, webhooks resend with the same Idempotency-Key).
- ``anchor``: state per (tenant, subscription, asset, tag) that later changes build on: the Slack thread (channel,
  ts), the Jira issue key; and ``shared``: per (tenant, asset, tag), what one subscription tells the others (the
  Jira issue a Slack thread links to).
- ``test``: the outcome of a subscription's test send (:mod:`control.subscriptions.testsend`, which the API reads).

Expiry: a step only has to outlive the redeliveries of its change (offset commit lag, the retry topic's window), so
every write of a step sets ``expires_at`` = now + ``retention``; an anchor lives as long as its tag is on the asset,
so it gets ``expires_at`` only when the tag's removal was delivered (:meth:`LedgerScope.release_anchor`) and loses it
when the tag comes back. MongoDB deletes expired documents through a TTL index on ``expires_at``
(:meth:`Ledger.ensure_expiry`); FerretDB 1.x has no TTL indexes, so there the runtime calls :meth:`Ledger.prune`
(``metalake.expiry``: the mechanism the webhook delivery log shares).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict

from pymongo import ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

from control.subscriptions.testsend import DELIVERIES
from metalake.expiry import delete_in_batches, ensure_ttl_index, expires_at
from metalake.mongo import Doc, typed_collection, while_unreachable

DEFAULT_RETENTION = timedelta(days=7)


def _now() -> datetime:
    return datetime.now(UTC)


def idempotency_key(tenant: str, subscription: str, change_id: str, operation: str) -> str:
    """Stable across redeliveries and retries; also sent as the webhook's ``Idempotency-Key``/``webhook-id``."""
    digest = hashlib.sha256(f"{tenant}\x1f{subscription}\x1f{change_id}\x1f{operation}".encode()).hexdigest()
    return f"mld_{digest[:40]}"


def _anchor_id(tenant: str, subscription: str, kind: str, asset: str, tag: str) -> str:
    digest = hashlib.sha256(f"{tenant}\x1f{subscription}\x1f{kind}\x1f{asset}\x1f{tag}".encode()).hexdigest()
    return f"anchor_{digest[:40]}"


class StepDoc(TypedDict):
    """A ``step`` document: :meth:`LedgerScope.begin` upserts every field but ``result`` and ``done_at``, which
    :meth:`LedgerScope.done` adds."""

    _id: str
    kind: Literal["step"]
    tenant: str
    subscription: str
    change_id: str
    operation: str
    state: Literal["in_flight", "done"]
    started_at: datetime
    attempts: int
    expires_at: datetime
    # What the destination answered (Slack channel and ts, Jira key).
    result: NotRequired[dict[str, Any]]
    done_at: NotRequired[datetime]


class AnchorDoc(TypedDict):
    """An ``anchor`` (per subscription) or ``shared`` (per tenant, ``subscription`` absent) document. An anchor's
    ``fields`` are the destination's state (Slack thread, Jira key); a shared document's map a subscription name to
    the value it shares. ``expires_at`` only once released."""

    _id: str
    kind: Literal["anchor", "shared"]
    # The destination's kind of anchor (e.g. a Slack thread, a Jira issue).
    anchor: str
    tenant: str
    subscription: NotRequired[str]
    asset: str
    tag: str
    fields: dict[str, Any]
    updated_at: datetime
    expires_at: NotRequired[datetime]


@dataclass(frozen=True)
class Step:
    key: str
    state: Literal["in_flight", "done"]
    attempts: int
    started_at: datetime | None
    result: Mapping[str, Any]


def expired_query(now: datetime, retention: timedelta) -> Doc:
    """The documents a pruning pass deletes: past ``expires_at`` and not an ``in_flight`` step younger than
    ``retention`` (a step's ``expires_at`` was computed with the retention of its writer, which may have been
    shorter). Documents without ``expires_at`` (anchors of tags still on their asset) never match."""
    return {
        "expires_at": {"$lte": now},
        "$or": [{"state": {"$ne": "in_flight"}}, {"started_at": {"$lte": now - retention}}],
    }


def _step(doc: StepDoc) -> Step:
    return Step(doc["_id"], doc["state"], int(doc.get("attempts", 0)), doc.get("started_at"), doc.get("result") or {})


class Ledger:
    def __init__(
        self, database: Database[Doc], retention: timedelta = DEFAULT_RETENTION, outage_wait_s: float = 300.0
    ) -> None:
        # One collection, documents of several kinds (by ``kind``): each kind is read and written through its view.
        self._steps: Collection[StepDoc] = typed_collection(database, DELIVERIES, StepDoc)
        self._anchors: Collection[AnchorDoc] = typed_collection(database, DELIVERIES, AnchorDoc)
        # Expiry spans every kind (test outcomes included) and reads only ``expires_at`` and ``_id``: an open view.
        self._all: Collection[Doc] = database[DELIVERIES]
        self.retention = retention
        # How long a step already performed waits for MongoDB to come back before the process gives up
        # (``mongo.outage_wait_s``): a restart would perform it again (a webhook sent twice, bench/soak.py saw it).
        self.outage_wait_s = outage_wait_s

    def forget_assets(self, tenant: str, erased: Callable[[str], bool]) -> int:
        """Delete the tenant's anchor and shared documents whose asset ``erased`` says was erased (a GDPR erase:
        they hold the URN in clear). One scan of the tenant's anchors per erase; returns how many went."""
        docs = self._anchors.find({"tenant": tenant, "kind": {"$in": ["anchor", "shared"]}}, {"asset": 1})
        ids = [d["_id"] for d in docs if isinstance(d.get("asset"), str) and erased(d["asset"])]
        return self._anchors.delete_many({"_id": {"$in": ids}}).deleted_count if ids else 0

    def scope(self, tenant: str, subscription: str, change_id: str) -> LedgerScope:
        scope = LedgerScope(self._steps, self._anchors, tenant, subscription, change_id, self.retention)
        scope.outage_wait_s = self.outage_wait_s
        return scope

    def ensure_expiry(self) -> bool:
        """Create the TTL index on ``expires_at``; ``False`` if the server has none (then :meth:`prune` must run)."""
        return ensure_ttl_index(self._all)

    def prune(self, now: datetime | None = None, batch: int = 500) -> int:
        """Delete expired documents in batches of ``batch`` (short writes: deliveries write the same collection, and
        FerretDB's SQLite backend serialised them all). Returns how many went."""
        return delete_in_batches(self._all, expired_query(now or _now(), self.retention), batch)

    def steps_of(self, tenant: str, subscription: str | None = None) -> list[Step]:
        query: Doc = {"kind": "step", "tenant": tenant}
        if subscription is not None:
            query["subscription"] = subscription
        return [_step(d) for d in self._steps.find(query)]


class LedgerScope:
    """The ledger as one delivery (tenant, subscription, change) sees it."""

    def __init__(
        self,
        steps: Collection[StepDoc],
        anchors: Collection[AnchorDoc],
        tenant: str,
        subscription: str,
        change_id: str,
        retention: timedelta = DEFAULT_RETENTION,
    ) -> None:
        self._steps, self._anchors = steps, anchors
        self.tenant, self.subscription, self.change_id = tenant, subscription, change_id
        self._retention = retention
        self.outage_wait_s = 300.0

    def _expiry(self, now: datetime) -> datetime:
        return expires_at(now, self._retention)

    def key(self, operation: str) -> str:
        return idempotency_key(self.tenant, self.subscription, self.change_id, operation)

    def begin(self, operation: str) -> Step | None:
        """Mark ``operation`` in flight; return the step as an earlier attempt left it (``None`` if first).

        Every attempt moves ``expires_at`` on: a change still being redelivered keeps its steps."""
        now = _now()
        before = self._steps.find_one_and_update(
            {"_id": self.key(operation)},
            {
                "$setOnInsert": {
                    "kind": "step",
                    "tenant": self.tenant,
                    "subscription": self.subscription,
                    "change_id": self.change_id,
                    "operation": operation,
                    "state": "in_flight",
                    "started_at": now,
                },
                "$set": {"expires_at": self._expiry(now)},
                "$inc": {"attempts": 1},
            },
            upsert=True,
            return_document=ReturnDocument.BEFORE,
        )
        return _step(before) if before is not None else None

    def done(self, operation: str, result: Mapping[str, Any]) -> None:
        """Record ``operation`` as performed; waits out a MongoDB outage (an idempotent ``$set``)."""
        now = _now()
        update = {"$set": {"state": "done", "result": dict(result), "done_at": now, "expires_at": self._expiry(now)}}
        while_unreachable(
            lambda: self._steps.update_one({"_id": self.key(operation)}, update), self.outage_wait_s, "ledger.done"
        )

    def once(self, operation: str, call: Callable[[Step | None], Mapping[str, Any]]) -> Mapping[str, Any]:
        """Run ``call(prior)`` unless ``operation`` is already done; record and return its result.

        ``prior`` is the in-flight step an interrupted attempt left (the call reconciles it) or ``None``.
        """
        prior = self.begin(operation)
        if prior is not None and prior.state == "done":
            return prior.result
        result: Mapping[str, Any] = call(prior)
        self.done(operation, result)
        return result

    # -- anchors ------------------------------------------------------------------------------------------------------

    def anchor(self, kind: str, asset: str, tag: str) -> Mapping[str, Any] | None:
        doc = self._anchors.find_one({"_id": _anchor_id(self.tenant, self.subscription, kind, asset, tag)})
        return doc.get("fields") if doc is not None else None

    def set_anchor(self, kind: str, asset: str, tag: str, fields: Mapping[str, Any], *, released: bool = False) -> None:
        """Write ``fields`` into the anchor and keep it; ``released`` (the tag's removal was delivered): let it
        expire after the retention instead, so what follows the removal (its propagation) still finds it."""
        now = _now()
        update: Doc = {
            "$set": {**{f"fields.{k}": v for k, v in fields.items()}, "updated_at": now},
            "$setOnInsert": {
                "kind": "anchor",
                "anchor": kind,
                "tenant": self.tenant,
                "subscription": self.subscription,
                "asset": asset,
                "tag": tag,
            },
        }
        if released:
            update["$set"]["expires_at"] = self._expiry(now)
        else:
            update["$unset"] = {"expires_at": ""}
        self._anchors.update_one(
            {"_id": _anchor_id(self.tenant, self.subscription, kind, asset, tag)}, update, upsert=True
        )

    def release_anchor(self, kind: str, asset: str, tag: str) -> None:
        """The tag's removal was delivered: the anchor expires after the retention (unless the tag comes back)."""
        self._anchors.update_one(
            {"_id": _anchor_id(self.tenant, self.subscription, kind, asset, tag)},
            {"$set": {"expires_at": self._expiry(_now())}},
        )

    def keep_anchor(self, kind: str, asset: str, tag: str) -> None:
        """The tag is on the asset (again): a released anchor no longer expires. Writes only if it was released."""
        self._anchors.update_one(
            {"_id": _anchor_id(self.tenant, self.subscription, kind, asset, tag), "expires_at": {"$exists": True}},
            {"$unset": {"expires_at": ""}},
        )

    def share(self, kind: str, asset: str, tag: str, value: Mapping[str, Any]) -> None:
        """Publish this subscription's ``value`` for (asset, tag) to the tenant's other subscriptions (Jira's issue
        key for Slack's thread). One document per (tenant, kind, asset, tag), read by id: no query, no index."""
        self._anchors.update_one(
            {"_id": _anchor_id(self.tenant, "*", kind, asset, tag)},
            {
                "$set": {f"fields.{self.subscription}": dict(value), "updated_at": _now()},
                "$unset": {"expires_at": ""},
                "$setOnInsert": {"kind": "shared", "anchor": kind, "tenant": self.tenant, "asset": asset, "tag": tag},
            },
            upsert=True,
        )

    def unshare(self, kind: str, asset: str, tag: str) -> None:
        """Withdraw this subscription's value (its issue was closed); once no subscription shares anything for
        (asset, tag), the document expires after the retention."""
        doc_id = _anchor_id(self.tenant, "*", kind, asset, tag)
        now = _now()
        self._anchors.update_one(
            {"_id": doc_id}, {"$unset": {f"fields.{self.subscription}": ""}, "$set": {"updated_at": now}}
        )
        self._anchors.update_one({"_id": doc_id, "fields": {}}, {"$set": {"expires_at": self._expiry(now)}})

    def shared(self, kind: str, asset: str, tag: str) -> list[Mapping[str, Any]]:
        """What the tenant's subscriptions shared for (asset, tag), ordered by subscription name."""
        doc = self._anchors.find_one({"_id": _anchor_id(self.tenant, "*", kind, asset, tag)})
        fields: Mapping[str, Any] = (doc.get("fields") if doc is not None else None) or {}
        return [fields[name] for name in sorted(fields)]
