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
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from pymongo import ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

DELIVERIES = "deliveries"

Doc = dict[str, Any]


def _now() -> datetime:
    return datetime.now(UTC)


def idempotency_key(tenant: str, subscription: str, change_id: str, operation: str) -> str:
    """Stable across redeliveries and retries; also sent as the webhook's ``Idempotency-Key``/``webhook-id``."""
    digest = hashlib.sha256(f"{tenant}\x1f{subscription}\x1f{change_id}\x1f{operation}".encode()).hexdigest()
    return f"mld_{digest[:40]}"


def _anchor_id(tenant: str, subscription: str, kind: str, asset: str, tag: str) -> str:
    digest = hashlib.sha256(f"{tenant}\x1f{subscription}\x1f{kind}\x1f{asset}\x1f{tag}".encode()).hexdigest()
    return f"anchor_{digest[:40]}"


@dataclass(frozen=True)
class Step:
    key: str
    state: Literal["in_flight", "done"]
    attempts: int
    started_at: datetime | None
    result: Mapping[str, Any]


def _step(doc: Doc) -> Step:
    return Step(doc["_id"], doc["state"], int(doc.get("attempts", 0)), doc.get("started_at"), doc.get("result") or {})


class Ledger:
    def __init__(self, database: Database[Doc]) -> None:
        self._docs: Collection[Doc] = database[DELIVERIES]

    def scope(self, tenant: str, subscription: str, change_id: str) -> LedgerScope:
        return LedgerScope(self._docs, tenant, subscription, change_id)

    def steps_of(self, tenant: str, subscription: str | None = None) -> list[Step]:
        query: Doc = {"kind": "step", "tenant": tenant}
        if subscription is not None:
            query["subscription"] = subscription
        return [_step(d) for d in self._docs.find(query)]


class LedgerScope:
    """The ledger as one delivery (tenant, subscription, change) sees it."""

    def __init__(self, docs: Collection[Doc], tenant: str, subscription: str, change_id: str) -> None:
        self._docs = docs
        self.tenant, self.subscription, self.change_id = tenant, subscription, change_id

    def key(self, operation: str) -> str:
        return idempotency_key(self.tenant, self.subscription, self.change_id, operation)

    def begin(self, operation: str) -> Step | None:
        """Mark ``operation`` in flight; return the step as an earlier attempt left it (``None`` if first)."""
        before = self._docs.find_one_and_update(
            {"_id": self.key(operation)},
            {
                "$setOnInsert": {
                    "kind": "step",
                    "tenant": self.tenant,
                    "subscription": self.subscription,
                    "change_id": self.change_id,
                    "operation": operation,
                    "state": "in_flight",
                    "started_at": _now(),
                },
                "$inc": {"attempts": 1},
            },
            upsert=True,
            return_document=ReturnDocument.BEFORE,
        )
        return _step(before) if before is not None else None

    def done(self, operation: str, result: Mapping[str, Any]) -> None:
        self._docs.update_one(
            {"_id": self.key(operation)},
            {"$set": {"state": "done", "result": dict(result), "done_at": _now()}},
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
        doc = self._docs.find_one({"_id": _anchor_id(self.tenant, self.subscription, kind, asset, tag)})
        return doc.get("fields") if doc is not None else None

    def set_anchor(self, kind: str, asset: str, tag: str, fields: Mapping[str, Any]) -> None:
        self._docs.update_one(
            {"_id": _anchor_id(self.tenant, self.subscription, kind, asset, tag)},
            {
                "$set": {**{f"fields.{k}": v for k, v in fields.items()}, "updated_at": _now()},
                "$setOnInsert": {
                    "kind": "anchor",
                    "anchor": kind,
                    "tenant": self.tenant,
                    "subscription": self.subscription,
                    "asset": asset,
                    "tag": tag,
                },
            },
            upsert=True,
        )

    def share(self, kind: str, asset: str, tag: str, value: Mapping[str, Any]) -> None:
        """Publish this subscription's ``value`` for (asset, tag) to the tenant's other subscriptions (Jira's issue
        key for Slack's thread). One document per (tenant, kind, asset, tag), read by id: no query, no index."""
        self._docs.update_one(
            {"_id": _anchor_id(self.tenant, "*", kind, asset, tag)},
            {
                "$set": {f"fields.{self.subscription}": dict(value), "updated_at": _now()},
                "$setOnInsert": {"kind": "shared", "anchor": kind, "tenant": self.tenant, "asset": asset, "tag": tag},
            },
            upsert=True,
        )

    def shared(self, kind: str, asset: str, tag: str) -> list[Mapping[str, Any]]:
        """What the tenant's subscriptions shared for (asset, tag), ordered by subscription name."""
        doc = self._docs.find_one({"_id": _anchor_id(self.tenant, "*", kind, asset, tag)})
        fields: Mapping[str, Any] = (doc or {}).get("fields") or {}
        return [fields[name] for name in sorted(fields)]
