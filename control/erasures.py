"""The erasure queue: GDPR erasures the admin API accepted and the lake worker (``processors.lake.worker``) runs.

The API only enqueues (:meth:`ErasureQueue.enqueue`); it never runs an erase. The queue is the ``erasures``
collection itself: ``accepted`` is queued, ``running`` is claimed by a worker, ``done`` and ``failed`` are finished.
It is bounded: at most ``erasure.queue_max`` unfinished erasures of all tenants, ``erasure.per_tenant_max`` of one
tenant, and one unfinished erasure per target of a tenant. The checks and the insert run under one short global lease
(``erasures:enqueue``, ``metalake.lease``), so concurrent requests, of any API replica, cannot overshoot the bounds.

``erasures`` documents: ``{_id: "<tenant>/<id>", tenant, id, target_hash, include_children, state, requested_by,
created_at, updated_at, counts: [{name, n}], error}``. The URN itself is never stored there: only its keyed hash
(``control.erased``: HMAC under a key derived from the KEK, the hash the erase command records in the tenant's audit
table; erasures from before hold its plain sha256), so the status of an erasure does not keep what was erased. The
status documents are also part of the tenant's erased set, by which the admin API filters dead letters.
The URN waits in ``erasures_pending`` (``{_id: "<tenant>/<id>", tenant, urn}``) until the erasure finishes; it is
written before the status document, so a queued erasure without one was interrupted and can only fail.

A worker runs an erasure under the lease ``<tenant>/erasure/<id>`` (deleted with the tenant): a crashed worker stops
renewing it, and once it expires another worker claims the erasure again (the erase is idempotent).
"""

from __future__ import annotations

import secrets
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NotRequired, TypedDict

from pymongo import ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

from metalake.lease import LeaseHeld, LeaseStore
from metalake.mongo import Doc, typed_collection

ERASURES_COLLECTION = "erasures"
PENDING_ERASURES = "erasures_pending"
# The lease that serialises the queue's admission checks (held for the few milliseconds of a check and an insert).
ENQUEUE_LEASE = "erasures:enqueue"
_ENQUEUE_LEASE_TTL_S = 30.0
_ENQUEUE_POLL_S = 0.05

ERASE_ID_NAMESPACE = uuid.UUID("6f1d5c3e-8a0b-5f4e-9c2d-7b6a5e4d3c2b")


def erasure_key(tenant: str, erasure_id: str) -> str:
    """The lease a worker holds while it runs the erasure."""
    return f"{tenant}/erasure/{erasure_id}"


def announcement_id(tenant: str, erasure_id: str) -> str:
    """The UUID the erase announces: derived from the erasure's id, the same on every run of it."""
    return str(uuid.uuid5(ERASE_ID_NAMESPACE, f"{tenant}/{erasure_id}"))


class ErasureState(StrEnum):
    ACCEPTED = "accepted"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"


UNFINISHED = [ErasureState.ACCEPTED.value, ErasureState.RUNNING.value]


@dataclass(frozen=True)
class ErasureRecord:
    tenant: str
    id: str
    target_hash: str
    include_children: bool
    state: ErasureState
    requested_by: str
    created_at: datetime
    updated_at: datetime
    counts: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None
    # Done, but an operator still has something to do (the erase's own fixed words, never a value).
    action_required: str | None = None


class ErasureCountDoc(TypedDict):
    """Rows or documents one table or collection lost (a list entry: the names hold '.', which FerretDB refuses in
    field names)."""

    name: str
    n: int


class ErasureDoc(TypedDict):
    """A document of ``erasures``, as :meth:`ErasureQueue.enqueue` inserts it; ``action_required`` comes with the
    first :meth:`ErasureStore.update`."""

    _id: str  # "<tenant>/<id>"
    tenant: str
    id: str
    # The erased URN's keyed hash (plain sha256 before issue 21); the URN itself is never stored.
    target_hash: str
    include_children: bool
    state: str
    requested_by: str
    created_at: datetime
    updated_at: datetime
    counts: list[ErasureCountDoc]
    error: str | None
    action_required: NotRequired[str | None]


class PendingErasureDoc(TypedDict):
    """A document of ``erasures_pending``: the URN of an unfinished erasure."""

    _id: str  # "<tenant>/<erasure id>", as the erasure's status document
    tenant: str
    urn: str


def _record(doc: ErasureDoc) -> ErasureRecord:
    return ErasureRecord(
        tenant=doc["tenant"],
        id=doc["id"],
        target_hash=doc["target_hash"],
        include_children=bool(doc.get("include_children")),
        state=ErasureState(doc["state"]),
        requested_by=doc["requested_by"],
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        counts={str(c["name"]): int(c["n"]) for c in doc.get("counts") or []},
        error=doc.get("error"),
        action_required=doc.get("action_required"),
    )


class ErasureStore:
    """The status documents. Single-document operations by ``_id``, and the scans of unfinished ones."""

    def __init__(self, database: Database[Doc]) -> None:
        self._erasures: Collection[ErasureDoc] = typed_collection(database, ERASURES_COLLECTION, ErasureDoc)

    def insert(self, doc: ErasureDoc) -> ErasureRecord:
        self._erasures.insert_one(doc)
        return _record(doc)

    def get(self, tenant: str, erasure_id: str) -> ErasureRecord | None:
        doc = self._erasures.find_one({"_id": f"{tenant}/{erasure_id}"})
        return _record(doc) if doc is not None else None

    @staticmethod
    def _queries(tenant: str | None) -> list[dict[str, Any]]:
        # One scalar equality per state rather than $in: FerretDB pushes only those down to PostgreSQL, and the
        # collection keeps every finished erasure too.
        return [{"state": state, **({"tenant": tenant} if tenant is not None else {})} for state in UNFINISHED]

    def unfinished(self, tenant: str | None = None) -> list[ErasureRecord]:
        """Every erasure still accepted or running (of one tenant, or of all), oldest first."""
        docs = [doc for query in self._queries(tenant) for doc in self._erasures.find(query)]
        docs.sort(key=lambda d: (d["created_at"], d["_id"]))
        return [_record(doc) for doc in docs]

    def count_unfinished(self, tenant: str | None = None) -> int:
        return sum(self._erasures.count_documents(query) for query in self._queries(tenant))

    def oldest_unfinished(self) -> datetime | None:
        """When the oldest erasure still accepted or running was requested (None: none is)."""
        oldest = [
            doc["created_at"]
            for query in self._queries(None)
            for doc in self._erasures.find(query, {"created_at": 1}).sort("created_at", 1).limit(1)
        ]
        return min(oldest, default=None)

    def update(
        self,
        tenant: str,
        erasure_id: str,
        state: ErasureState,
        *,
        counts: Mapping[str, int] | None = None,
        error: str | None = None,
        action_required: str | None = None,
    ) -> ErasureRecord | None:
        changes: Doc = {
            "state": state.value,
            "updated_at": datetime.now(UTC),
            "error": error,
            "action_required": action_required,
        }
        if counts is not None:
            # A list, not an object: the names hold '.', which FerretDB refuses in field names.
            changes["counts"] = [{"name": name, "n": n} for name, n in sorted(counts.items())]
        doc = self._erasures.find_one_and_update(
            {"_id": f"{tenant}/{erasure_id}"}, {"$set": changes}, return_document=ReturnDocument.AFTER
        )
        return _record(doc) if doc is not None else None


class PendingErasures:
    """The URNs of unfinished erasures (see the module docstring). Single-document operations by ``_id``."""

    def __init__(self, database: Database[Doc]) -> None:
        self._pending = typed_collection(database, PENDING_ERASURES, PendingErasureDoc)

    def put(self, tenant: str, erasure_id: str, urn: str) -> None:
        # The replacement leaves out _id: the upsert takes it from the filter.
        self._pending.replace_one({"_id": f"{tenant}/{erasure_id}"}, {"tenant": tenant, "urn": urn}, upsert=True)

    def urn(self, tenant: str, erasure_id: str) -> str | None:
        doc = self._pending.find_one({"_id": f"{tenant}/{erasure_id}"})
        return doc["urn"] if doc is not None else None

    def drop(self, tenant: str, erasure_id: str) -> None:
        self._pending.delete_one({"_id": f"{tenant}/{erasure_id}"})


class QueueFull(RuntimeError):
    """The erasure is refused for now: the queue (``scope`` ``"global"``) or the tenant's share of it is full."""

    def __init__(self, scope: str, limit: int) -> None:
        super().__init__(f"{scope} erasure limit of {limit} unfinished erasures reached")
        self.scope = scope
        self.limit = limit


class AlreadyQueued(RuntimeError):
    """The tenant already has an unfinished erasure of the same target (its id in ``existing``)."""

    def __init__(self, existing: str) -> None:
        super().__init__(f"an erasure of the same target is already queued or running: {existing}")
        self.existing = existing


@dataclass(frozen=True)
class QueueLimits:
    queue_max: int
    per_tenant_max: int
    # How long a request waits for another request's admission check before it is refused as busy.
    admit_wait_s: float = 5.0


class ErasureQueue:
    """Admission to the bounded queue (see the module docstring)."""

    def __init__(self, database: Database[Doc], limits: QueueLimits) -> None:
        self.store = ErasureStore(database)
        self.pending = PendingErasures(database)
        self._leases = LeaseStore.in_database(database)
        self._limits = limits

    def enqueue(
        self, tenant: str, urn: str, target_hash: str, include_children: bool, requested_by: str
    ) -> ErasureRecord:
        """Queue an erasure of ``urn``: raises :class:`QueueFull` or :class:`AlreadyQueued` instead past a bound."""
        deadline = time.monotonic() + self._limits.admit_wait_s
        while True:
            try:
                with self._leases.held(ENQUEUE_LEASE, _ENQUEUE_LEASE_TTL_S):
                    return self._admit(tenant, urn, target_hash, include_children, requested_by)
            except LeaseHeld:
                if time.monotonic() >= deadline:
                    # Admission is this contended: the queue is as good as full.
                    raise QueueFull("global", self._limits.queue_max) from None
                time.sleep(_ENQUEUE_POLL_S)

    def _admit(
        self, tenant: str, urn: str, target_hash: str, include_children: bool, requested_by: str
    ) -> ErasureRecord:
        mine = self.store.unfinished(tenant)
        same = next((r for r in mine if r.target_hash == target_hash), None)
        if same is not None:
            raise AlreadyQueued(same.id)
        if len(mine) >= self._limits.per_tenant_max:
            raise QueueFull("tenant", self._limits.per_tenant_max)
        if self.store.count_unfinished() >= self._limits.queue_max:
            raise QueueFull("global", self._limits.queue_max)
        now = datetime.now(UTC)
        erasure_id = f"era_{secrets.token_hex(12)}"
        # The URN first: a worker that finds a queued erasure without its URN fails it as interrupted.
        self.pending.put(tenant, erasure_id, urn)
        try:
            return self._insert(tenant, erasure_id, target_hash, include_children, requested_by, now)
        except Exception:
            self.pending.drop(tenant, erasure_id)  # no erasure will run: its URN must not stay behind
            raise

    def _insert(
        self, tenant: str, erasure_id: str, target_hash: str, include_children: bool, requested_by: str, now: datetime
    ) -> ErasureRecord:
        return self.store.insert(
            {
                "_id": f"{tenant}/{erasure_id}",
                "tenant": tenant,
                "id": erasure_id,
                "target_hash": target_hash,
                "include_children": include_children,
                "state": ErasureState.ACCEPTED.value,
                "requested_by": requested_by,
                "created_at": now,
                "updated_at": now,
                "counts": [],
                "error": None,
            }
        )
