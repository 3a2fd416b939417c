"""Leases in a MongoDB collection: at most one live holder per key, across processes and machines.

One document per key, ``{_id: key, owner, acquired_at, expires_at}``. Every operation is a single-document
conditional write on ``_id`` (FerretDB has no transactions and pushes down only ``_id`` equality):

- acquire: insert the document if there is none (a duplicate key means another caller won); renew it if it is
  ours; take it over if it expired, once the caller has won the takeover: an insert keyed by the expired holding
  (``<key>#takeover#<owner>@<expires_at>``), because a unique ``_id`` is the one thing FerretDB decides atomically
  (it checks a filter on other fields after reading the document, so two conditional updates can both succeed);
- renew: extend ``expires_at`` only while the caller is still the owner;
- release: delete the document only if the caller is still the owner.

A holder that dies stops renewing; its lease expires after ``ttl_s`` and the next caller takes it over. Clocks of the
holders are compared through ``expires_at``: keep ``ttl_s`` well above the clock skew between machines.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, TypedDict

from pymongo.collection import Collection
from pymongo.database import Database
from pymongo.errors import DuplicateKeyError, PyMongoError

from metalake.mongo import typed_collection

# The control-plane collection that holds the leases of every kind (keys start with the tenant id where they
# belong to one, so deleting a tenant deletes its leases).
LEASES = "leases"
# A takeover claim's key: the lease's key, this marker, the expired holding (see LeaseStore._claim_takeover).
_TAKEOVER = "#takeover#"
_CLAIMS_KEPT = timedelta(days=1)

log = logging.getLogger(__name__)


def _aware(value: datetime) -> datetime:
    # pymongo hands out naive UTC datetimes unless the client was made with tz_aware=True.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def new_owner() -> str:
    """Names this holder in the lease document: which machine and process holds it, for an operator reading it."""
    return f"{socket.gethostname()}:{os.getpid()}:{secrets.token_hex(4)}"


class LeaseDoc(TypedDict):
    """A document of ``leases``: who holds the key (see :func:`new_owner`), since when and until when."""

    _id: str
    owner: str
    acquired_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class Lease:
    key: str
    owner: str
    expires_at: datetime


class LeaseHeld(RuntimeError):
    """Another live holder has the lease; the message names it and until when it holds it."""

    def __init__(self, key: str, holder: LeaseDoc | None) -> None:
        owner = holder.get("owner") if holder else None
        until = holder.get("expires_at") if holder else None
        until_text = f" until {until:%H:%M:%S} UTC" if isinstance(until, datetime) else ""
        super().__init__(f"{key} is held by {owner or 'another process'}{until_text}")
        self.key = key


class LeaseStore:
    def __init__(self, collection: Collection[LeaseDoc], *, clock: Callable[[], datetime] | None = None) -> None:
        self._leases = collection
        self._clock = clock or (lambda: datetime.now(UTC))

    @classmethod
    def in_database(cls, database: Database[Any]) -> LeaseStore:
        """The store over the ``leases`` collection of ``database`` (the control plane's)."""
        return cls(typed_collection(database, LEASES, LeaseDoc))

    def acquire(self, key: str, owner: str, ttl_s: float) -> Lease | None:
        """The lease, if it was free, expired or already ours; ``None`` if a live holder has it (or another
        contender won the takeover of an expired one)."""
        now = self._clock()
        expires = now + timedelta(seconds=ttl_s)
        fields = {"owner": owner, "acquired_at": now, "expires_at": expires}
        current = self._leases.find_one({"_id": key})
        if current is None:
            try:
                self._leases.insert_one({"_id": key, "owner": owner, "acquired_at": now, "expires_at": expires})
            except DuplicateKeyError:
                return None
            return Lease(key, owner, expires)
        if current["owner"] == owner:
            held: dict[str, Any] = {"_id": key, "owner": owner}
            fields.pop("acquired_at")  # renewing our own holding keeps its start
        elif _aware(current["expires_at"]) > now or not self._claim_takeover(key, current, owner, now):
            return None
        else:
            # The one contender that claimed this expired holding's takeover; the filter still names the holding
            # read, in case its holder renewed it (or released it and it was taken afresh) meanwhile.
            held = {"_id": key, "owner": current["owner"], "expires_at": current["expires_at"]}
        done = self._leases.update_one(held, {"$set": fields})
        return Lease(key, owner, expires) if done.matched_count else None

    def _claim_takeover(self, key: str, expired: LeaseDoc, owner: str, now: datetime) -> bool:
        """Whether ``owner`` won the takeover of the ``expired`` holding: an insert keyed by that holding (its owner
        and the deadline it let pass), which one contender alone can make. FerretDB evaluates a filter on other
        fields than ``_id`` after reading the document, so a conditional update cannot decide such a race (measured:
        two to four winners of four contenders in nine rounds of ten); a unique ``_id`` can. Claims are kept a day,
        then pruned."""
        deadline = _aware(expired["expires_at"]).isoformat()
        claim = f"{key}{_TAKEOVER}{expired['owner']}@{deadline}"
        try:
            self._leases.insert_one({"_id": claim, "owner": owner, "acquired_at": now, "expires_at": now})
        except DuplicateKeyError:
            return False
        stale = now - _CLAIMS_KEPT
        self._leases.delete_many({"_id": {"$regex": f"^{re.escape(key + _TAKEOVER)}"}, "expires_at": {"$lt": stale}})
        return True

    def holder(self, key: str) -> LeaseDoc | None:
        return self._leases.find_one({"_id": key})

    def renew(self, lease: Lease, ttl_s: float) -> Lease | None:
        """The lease with a later expiry, or ``None`` if it was lost (expired and taken over)."""
        expires = self._clock() + timedelta(seconds=ttl_s)
        done = self._leases.update_one({"_id": lease.key, "owner": lease.owner}, {"$set": {"expires_at": expires}})
        return Lease(lease.key, lease.owner, expires) if done.matched_count else None

    def release(self, lease: Lease) -> None:
        self._leases.delete_one({"_id": lease.key, "owner": lease.owner})

    @contextmanager
    def held(self, key: str, ttl_s: float, owner: str | None = None) -> Iterator[Lease]:
        """Hold ``key`` for the block, renewed in the background every third of ``ttl_s``; raises :class:`LeaseHeld`
        if a live holder has it. If a renewal finds the lease lost (this process stalled past ``ttl_s``), the block
        runs on: the work it guards must itself be safe to repeat, the lease only keeps two runs from overlapping in
        the normal case."""
        lease = self.acquire(key, owner or new_owner(), ttl_s)
        if lease is None:
            raise LeaseHeld(key, self.holder(key))
        stop = threading.Event()

        def keep() -> None:
            current: Lease | None = lease
            while current is not None and not stop.wait(ttl_s / 3):
                try:
                    current = self.renew(current, ttl_s)
                except PyMongoError as exc:
                    # MongoDB blinked: try again at the next tick; the lease lasts ttl_s from the last renewal.
                    log.warning("lease renewal failed", extra={"lease": key, "error": type(exc).__name__})
                if current is None:
                    log.warning("lease lost", extra={"lease": key})

        renewer = threading.Thread(target=keep, name=f"lease-{key}", daemon=True)
        renewer.start()
        try:
            yield lease
        finally:
            stop.set()
            renewer.join(timeout=ttl_s)
            self.release(lease)
