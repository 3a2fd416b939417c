"""The tenants the platform knows: the control-plane collection ``tenants`` in MongoDB ``metalake_control``.

One document per tenant, ``{_id: <tenant id>, tier, state, lake_root, display_name, settings, steps, error,
created_at, updated_at, queued_at}``. ``steps`` records which provisioning steps are done, so a provisioning
interrupted by a crash resumes where it stopped. ``queued_at`` is set while the tenant waits for the lake worker to
(de)provision it (``control.provisioning.queue``): when the admin API queued the work, unset once it is done.
Every write is a single-document operation (FerretDB: no transactions); a state change is a compare-and-set on the
current state, so two administrators cannot both move one tenant.

:class:`TenantDirectory` is the read side the hot paths use (the connector publisher, token checks): a small TTL
cache in front of :class:`TenantRegistry`. A tenant nobody registered is pooled and active: events from tests and the
demo use such tenants.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from enum import StrEnum
from typing import Any, NotRequired, Protocol, TypedDict

from pymongo import ASCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError

from metalake.cache import TtlCache
from metalake.lake_uri import LakeRoot, lake_root_of
from metalake.mongo import Doc, mongo_client, typed_collection
from metalake.settings import KernelSettings
from tenants.model import Tier
from tenants.naming import CONTROL_DATABASE, TenantNames, names_for, validate_tenant_id

__all__ = [
    "DELETED_TENANTS_COLLECTION",
    "TENANTS_COLLECTION",
    "TenantDirectory",
    "TenantDoc",
    "TenantExists",
    "TenantLookup",
    "TenantRecord",
    "TenantRegistry",
    "TenantState",
]

TENANTS_COLLECTION = "tenants"
# One tombstone per deleted tenant id, ``{_id: <tenant id>, deleted_at}``: once its document is gone a deleted tenant
# would read as an unregistered (pooled, usable) one, and events still in Kafka would recreate its data.
DELETED_TENANTS_COLLECTION = "tenants_deleted"


class TenantState(StrEnum):
    """``provisioning`` until every step ran; ``suspended`` refuses tokens and ingest; ``deleting`` is one-way."""

    PROVISIONING = "provisioning"
    ACTIVE = "active"
    SUSPENDED = "suspended"
    DELETING = "deleting"


class TenantExists(Exception):
    """A tenant with this id is already registered."""


@dataclass(frozen=True)
class TenantRecord:
    """A registered tenant. ``lake_root`` is ``None`` when the tenant lives under the platform's lake root."""

    id: str
    tier: Tier
    state: TenantState
    lake_root: LakeRoot | None
    created_at: datetime
    updated_at: datetime
    display_name: str | None = None
    settings: Mapping[str, Any] = field(default_factory=dict)
    steps: Mapping[str, datetime] = field(default_factory=dict)
    error: str | None = None
    # When the admin API queued the tenant's (de)provisioning for the lake worker; None: nothing queued.
    queued_at: datetime | None = None

    @property
    def dedicated(self) -> bool:
        return self.tier is Tier.DEDICATED

    @property
    def is_active(self) -> bool:
        return self.state is TenantState.ACTIVE

    def names(self, default_lake_root: LakeRoot) -> TenantNames:
        return names_for(self.id, self.lake_root or default_lake_root, dedicated=self.dedicated)


class TenantDoc(TypedDict):
    """A document of ``tenants`` as :meth:`TenantRegistry.create` writes it (every field, ``None`` when unset)."""

    _id: str
    tier: str
    state: str
    lake_root: str | None
    display_name: str | None
    settings: dict[str, Any]
    # Provisioning step name -> when it was done; a step undone is unset.
    steps: dict[str, datetime]
    error: str | None
    created_at: datetime
    updated_at: datetime
    queued_at: NotRequired[datetime | None]


def _now() -> datetime:
    return datetime.now(UTC)


def _record(doc: TenantDoc) -> TenantRecord:
    lake_root = doc.get("lake_root")
    return TenantRecord(
        id=doc["_id"],
        tier=Tier(doc["tier"]),
        state=TenantState(doc["state"]),
        lake_root=lake_root_of(lake_root) if lake_root else None,
        created_at=doc["created_at"],
        updated_at=doc["updated_at"],
        display_name=doc.get("display_name"),
        settings=dict(doc.get("settings") or {}),
        steps=dict(doc.get("steps") or {}),
        error=doc.get("error"),
        queued_at=doc.get("queued_at"),
    )


class TenantRegistry:
    """Typed, single-document access to the ``tenants`` collection. Thread-safe (pymongo clients are)."""

    def __init__(self, database: Database[Doc]) -> None:
        self._tenants: Collection[TenantDoc] = typed_collection(database, TENANTS_COLLECTION, TenantDoc)
        self._deleted: Collection[Doc] = database[DELETED_TENANTS_COLLECTION]

    @classmethod
    def connect(cls, settings: KernelSettings) -> TenantRegistry:
        client = mongo_client(settings)
        return cls(client[CONTROL_DATABASE])

    def create(
        self,
        tenant_id: str,
        tier: Tier,
        *,
        display_name: str | None = None,
        settings: Mapping[str, Any] | None = None,
        lake_root: LakeRoot | None = None,
    ) -> TenantRecord:
        """Register a tenant in state ``provisioning``, queued for the lake worker; raise :class:`TenantExists` if the
        id is taken."""
        validate_tenant_id(tenant_id)
        now = _now()
        doc: TenantDoc = {
            "_id": tenant_id,
            "tier": Tier(tier).value,
            "state": TenantState.PROVISIONING.value,
            "lake_root": str(lake_root) if lake_root else None,
            "display_name": display_name,
            "settings": dict(settings or {}),
            "steps": {},
            "error": None,
            "created_at": now,
            "updated_at": now,
            "queued_at": now,
        }
        try:
            self._tenants.insert_one(doc)
        except DuplicateKeyError as exc:
            raise TenantExists(tenant_id) from exc
        # A re-created id starts clean: its events are accepted again.
        self._deleted.delete_one({"_id": tenant_id})
        return _record(doc)

    def get(self, tenant_id: str) -> TenantRecord | None:
        doc = self._tenants.find_one({"_id": tenant_id})
        return _record(doc) if doc is not None else None

    def queued(self) -> list[TenantRecord]:
        """Tenants with (de)provisioning work queued or failed (``control.provisioning.queue``), in id order: the
        lake worker polls this, so the filter runs in the database rather than over every tenant's record here."""
        work = [TenantState.PROVISIONING.value, TenantState.DELETING.value]
        query: Doc = {"$or": [{"queued_at": {"$ne": None}}, {"state": {"$in": work}}]}
        return [_record(d) for d in self._tenants.find(query).sort("_id", ASCENDING)]

    def list(self, *, after: str | None = None, limit: int | None = None) -> list[TenantRecord]:
        """Tenants in id order; ``after`` is the last id of the previous page."""
        query: Doc = {} if after is None else {"_id": {"$gt": after}}
        cursor = self._tenants.find(query).sort("_id", ASCENDING)
        if limit is not None:
            cursor = cursor.limit(limit)
        return [_record(d) for d in cursor]

    def update(
        self,
        tenant_id: str,
        *,
        display_name: str | None = None,
        settings: Mapping[str, Any] | None = None,
    ) -> TenantRecord | None:
        """Change what may change without reprovisioning; ``None`` leaves a field as it is. ``None`` if unknown."""
        changes: Doc = {"updated_at": _now()}
        if display_name is not None:
            changes["display_name"] = display_name
        if settings is not None:
            changes["settings"] = dict(settings)
        return self._update(tenant_id, {"$set": changes})

    def set_state(
        self,
        tenant_id: str,
        state: TenantState,
        *,
        expected: Iterable[TenantState] | None = None,
        error: str | None = None,
    ) -> TenantRecord | None:
        """Move a tenant to ``state`` if it is in one of ``expected`` (any state when ``None``).

        Returns the updated record, or ``None`` when the tenant is unknown or in another state (compare-and-set).
        Moving to ``provisioning`` or ``deleting`` queues the work for the lake worker (``queued_at``).
        """
        query: Doc = {"_id": tenant_id}
        if expected is not None:
            query["state"] = {"$in": [TenantState(s).value for s in expected]}
        now = _now()
        changes: Doc = {"state": state.value, "error": error, "updated_at": now}
        if state in (TenantState.PROVISIONING, TenantState.DELETING):
            changes["queued_at"] = now
        return self._update_where(query, {"$set": changes})

    def queue(self, tenant_id: str) -> TenantRecord | None:
        """Queue the tenant's pending work for the lake worker again (``POST .../provision``): its error goes."""
        now = _now()
        return self._update(tenant_id, {"$set": {"error": None, "queued_at": now, "updated_at": now}})

    def dequeue(self, tenant_id: str, queued_at: datetime | None) -> TenantRecord | None:
        """The queued work is done: unset ``queued_at`` if it is still ``queued_at`` (a request that queued the
        tenant again meanwhile keeps it queued)."""
        return self._update_where({"_id": tenant_id, "queued_at": queued_at}, {"$set": {"queued_at": None}})

    def mark_step(self, tenant_id: str, step: str, *, done: bool) -> TenantRecord | None:
        """Record that a provisioning step is done (or undone, when deprovisioning)."""
        key = f"steps.{step}"
        update: Doc = (
            {"$set": {key: _now(), "updated_at": _now()}}
            if done
            else {"$unset": {key: ""}, "$set": {"updated_at": _now()}}
        )
        return self._update(tenant_id, update)

    def set_error(self, tenant_id: str, error: str | None) -> TenantRecord | None:
        return self._update(tenant_id, {"$set": {"error": error, "updated_at": _now()}})

    def delete(self, tenant_id: str) -> bool:
        return self._tenants.delete_one({"_id": tenant_id}).deleted_count == 1

    def forget(self, tenant_id: str) -> bool:
        """Delete the tenant's document, leaving a tombstone that :meth:`refused_for_events` reads (the end of a
        deprovisioning). The tombstone goes first: at no moment is the tenant neither being deleted nor deleted."""
        self._deleted.replace_one({"_id": tenant_id}, {"deleted_at": _now()}, upsert=True)
        return self.delete(tenant_id)

    def refused_for_events(self, tenant_ids: Iterable[str]) -> set[str]:
        """Those of ``tenant_ids`` whose events must be dropped: being deleted, or deleted (a tombstone). Two
        queries whatever the number of tenants. Suspended tenants are not among them (see docs/tenants.md)."""
        ids = sorted(set(tenant_ids))
        if not ids:
            return set()
        deleting = self._tenants.find({"_id": {"$in": ids}, "state": TenantState.DELETING.value}, {"_id": 1})
        deleted = self._deleted.find({"_id": {"$in": ids}}, {"_id": 1})
        return {str(d["_id"]) for d in deleting} | {str(d["_id"]) for d in deleted}

    def is_active(self, tenant_id: str, *, unregistered: bool = False) -> bool:
        """Whether the tenant may get tokens and send events; ``unregistered`` answers for unknown tenants."""
        record = self.get(tenant_id)
        return unregistered if record is None else record.is_active

    def _update(self, tenant_id: str, update: Doc) -> TenantRecord | None:
        return self._update_where({"_id": tenant_id}, update)

    def _update_where(self, query: Doc, update: Doc) -> TenantRecord | None:
        doc = self._tenants.find_one_and_update(query, update, return_document=ReturnDocument.AFTER)
        return _record(doc) if doc is not None else None


class TenantLookup(Protocol):
    def get(self, tenant_id: str) -> TenantRecord | None: ...


class TenantDirectory:
    """A TTL cache over :class:`TenantRegistry` for hot paths: which topics, which lake root, is it active.

    A change (a new dedicated tenant, a suspension) is seen within ``ttl_s``. When the registry cannot be reached,
    an expired entry is still used rather than failing: routing must not flip because MongoDB blinked.
    """

    def __init__(
        self,
        registry: TenantLookup,
        lake_root: LakeRoot,
        *,
        ttl_s: float = 5.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._lake_root = lake_root
        self._cache: TtlCache[str, TenantRecord | None] = TtlCache(ttl_s, keep_stale_on_error=True, clock=clock)

    @classmethod
    def connect(cls, settings: KernelSettings, *, ttl_s: float = 5.0) -> TenantDirectory:
        return cls(TenantRegistry.connect(settings), settings.lake_root, ttl_s=ttl_s)

    def record(self, tenant_id: str) -> TenantRecord | None:
        """The registered tenant, or ``None`` if nobody registered it (then it is pooled)."""
        return self._cache.get(tenant_id, lambda: self._registry.get(tenant_id))

    def names(self, tenant_id: str) -> TenantNames:
        """The tenant's physical names: dedicated topics for a dedicated tenant, pooled ones otherwise."""
        record = self.record(validate_tenant_id(tenant_id))
        if record is None:
            return names_for(tenant_id, self._lake_root)
        return record.names(self._lake_root)

    def is_active(self, tenant_id: str, *, unregistered: bool = True) -> bool:
        """Whether tokens and events of the tenant are accepted; an unregistered tenant answers ``unregistered``."""
        record = self.record(tenant_id)
        return unregistered if record is None else record.is_active

    def invalidate(self, tenant_id: str | None = None) -> None:
        """Forget one tenant (or all): the next lookup reads the registry."""
        if tenant_id is None:
            self._cache.clear()
        else:
            self._cache.invalidate(tenant_id)
