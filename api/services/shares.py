"""Share links: a saved query of one tenant that anyone holding the link may run until it expires or is revoked.

Stored in the control plane (``metalake_control.shares``), one document per link, keyed by the sha256 of the link's
token: the token itself (32 random bytes) is shown once and never stored, so a copy of the database opens no link.
Looking a link up by the hash of the presented token needs no secret comparison in Python at all. The hash is also
the link's public reference (``ref``) in the list and revoke routes: it opens nothing.
"""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, NotRequired, TypedDict

from pymongo.database import Database

from metalake.mongo import typed_collection

SHARES_COLLECTION = "shares"
_TOKEN_BYTES = 32


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def _aware(value: datetime) -> datetime:
    # FerretDB returns naive datetimes unless the client asked for tz-aware ones: they are UTC.
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


class ShareDoc(TypedDict):
    """A document of ``shares``, as :meth:`ShareStore.create` inserts it."""

    _id: str  # sha256 of the link's token
    tenant: str
    sql: str
    max_rows: int | None
    created_by: str
    created_at: datetime
    expires_at: datetime
    # Set by revoke (absent on links made before revocation existed).
    revoked_at: NotRequired[datetime | None]
    revoked_by: NotRequired[str | None]


@dataclass(frozen=True)
class Share:
    hash: str
    tenant: str
    sql: str
    max_rows: int | None
    created_by: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None = None
    revoked_by: str | None = None

    def expired(self, now: datetime) -> bool:
        return now >= self.expires_at

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None


def _share(doc: ShareDoc) -> Share:
    revoked_at = doc.get("revoked_at")
    return Share(
        hash=doc["_id"],
        tenant=doc["tenant"],
        sql=doc["sql"],
        max_rows=doc.get("max_rows"),
        created_by=doc["created_by"],
        created_at=_aware(doc["created_at"]),
        expires_at=_aware(doc["expires_at"]),
        revoked_at=_aware(revoked_at) if revoked_at is not None else None,
        revoked_by=doc.get("revoked_by"),
    )


class ShareStore:
    def __init__(self, control: Database[dict[str, Any]]) -> None:
        self._shares = typed_collection(control, SHARES_COLLECTION, ShareDoc)

    def create(
        self, tenant: str, sql: str, *, created_by: str, ttl: timedelta, max_rows: int | None = None
    ) -> tuple[str, Share]:
        """A new link: (the token, shown once; the stored share)."""
        token = secrets.token_urlsafe(_TOKEN_BYTES)
        now = datetime.now(UTC)
        share = Share(token_hash(token), tenant, sql, max_rows, created_by, now, now + ttl)
        self._shares.insert_one(
            {
                "_id": share.hash,
                "tenant": tenant,
                "sql": sql,
                "max_rows": max_rows,
                "created_by": created_by,
                "created_at": share.created_at,
                "expires_at": share.expires_at,
            }
        )
        return token, share

    def get(self, token: str) -> Share | None:
        """The link a presented token opens (looked up by its hash)."""
        doc = self._shares.find_one({"_id": token_hash(token)})
        return _share(doc) if doc is not None else None

    def list(self, tenant: str, *, after: str | None = None, limit: int = 100) -> list[Share]:
        """The tenant's links by reference (the hash), from after ``after``: expired ones until they are pruned."""
        query: dict[str, Any] = {"tenant": tenant}
        if after is not None:
            query["_id"] = {"$gt": after}
        return [_share(doc) for doc in self._shares.find(query).sort("_id", 1).limit(limit)]

    def revoke(self, tenant: str, ref: str, *, by: str) -> Share | None:
        """Revoke the tenant's link ``ref`` (its hash) now; None if the tenant has no such link. Revoking a revoked
        link keeps its first revocation."""
        now = datetime.now(UTC)
        self._shares.update_one(
            {"_id": ref, "tenant": tenant, "revoked_at": None},
            {"$set": {"revoked_at": now, "revoked_by": by}},
        )
        doc = self._shares.find_one({"_id": ref, "tenant": tenant})
        return _share(doc) if doc is not None else None

    def purge_expired(self, now: datetime) -> int:
        """Delete links that expired (no TTL indexes on FerretDB: pruning is ours)."""
        return self._shares.delete_many({"expires_at": {"$lte": now}}).deleted_count
