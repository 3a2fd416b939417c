"""API clients: OAuth 2 confidential clients per tenant, in the control plane (``metalake_control.clients``).

One document per client: ``{_id: client_id, tenant, role, scopes, name, state, secrets: [{hash, created_at,
expires_at}], created_at, updated_at, revoked_at}``. A secret is shown once (the create and rotate answers) and
stored only as an scrypt hash with a per-secret salt; verification compares in constant time and always hashes
every stored secret, so timing does not tell which one matched.

Rotation keeps the previous secret valid for an overlap window (``settings.api.secret_overlap_s`` unless the caller
asks for another, 0 revokes it at once), so a deployment can roll the new secret out without downtime. At most two
secrets are ever valid. Revocation drops every secret; tokens already issued to the client stop being accepted once
the resource server's client cache (``settings.api.client_cache_ttl_s``) notices.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import TypedDict

from pymongo import ASCENDING, ReturnDocument
from pymongo.collection import Collection
from pymongo.database import Database

from control.auth.principal import Scope
from metalake.cache import TtlCache
from metalake.mongo import Doc, typed_collection

CLIENTS_COLLECTION = "clients"


# scrypt at 16 MiB: a deliberate cost per guess should the hashes leak; secrets are 256-bit random anyway.
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1


class Role(StrEnum):
    READ_ONLY = "read-only"
    READ_WRITE = "read-write"
    ADMIN = "admin"
    PLATFORM_ADMIN = "platform-admin"


ROLE_SCOPES: dict[Role, tuple[Scope, ...]] = {
    Role.READ_ONLY: (Scope.TENANT_READ, Scope.SQL_READ),
    Role.READ_WRITE: (Scope.TENANT_READ, Scope.SQL_READ, Scope.EVENTS_WRITE),
    Role.ADMIN: (Scope.TENANT_ADMIN, Scope.TENANT_READ, Scope.SQL_READ, Scope.EVENTS_WRITE),
    Role.PLATFORM_ADMIN: (Scope.PLATFORM_ADMIN,),
}


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def hash_secret(secret: str) -> str:
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32)
    b64 = base64.urlsafe_b64encode
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${b64(salt).decode()}${b64(digest).decode()}"


def verify_secret(secret: str, stored: str) -> bool:
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        expected = base64.urlsafe_b64decode(digest)
        actual = hashlib.scrypt(
            secret.encode(), salt=base64.urlsafe_b64decode(salt), n=int(n), r=int(r), p=int(p), dklen=len(expected)
        )
    except ValueError:
        return False
    return scheme == "scrypt" and hmac.compare_digest(actual, expected)


class ClientSecretDoc(TypedDict):
    """One of a client's secrets: its scrypt hash (see :func:`hash_secret`); ``expires_at`` is set once rotated."""

    hash: str
    created_at: datetime
    expires_at: datetime | None


class ClientDoc(TypedDict):
    """A document of ``clients``, as :meth:`ClientStore.create` inserts it (``tenant`` is ``None`` for a platform
    admin, ``revoked_at`` until revoked)."""

    _id: str  # the client_id
    tenant: str | None
    role: str
    scopes: list[str]
    name: str
    state: str
    # Newest first, at most two live.
    secrets: list[ClientSecretDoc]
    created_at: datetime
    updated_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class SecretInfo:
    hash: str
    created_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class ClientRecord:
    client_id: str
    tenant: str | None
    role: Role
    scopes: tuple[str, ...]
    name: str
    state: str
    created_at: datetime
    updated_at: datetime
    secrets: tuple[SecretInfo, ...]
    revoked_at: datetime | None = None

    @property
    def active(self) -> bool:
        return self.state == "active"

    def live_secrets(self, now: datetime) -> tuple[SecretInfo, ...]:
        return tuple(s for s in self.secrets if s.expires_at is None or s.expires_at > now)

    def verify(self, secret: str) -> bool:
        """Constant-time: every live secret is hashed and compared whatever the outcome of the others."""
        if not self.active:
            return False
        ok = False
        for info in self.live_secrets(_now()):
            ok = verify_secret(secret, info.hash) | ok
        return ok


def _record(doc: ClientDoc) -> ClientRecord:
    created, updated = _aware(doc["created_at"]), _aware(doc["updated_at"])
    assert created is not None and updated is not None  # noqa: S101 - written by create
    return ClientRecord(
        client_id=doc["_id"],
        tenant=doc.get("tenant"),
        role=Role(doc["role"]),
        scopes=tuple(doc.get("scopes") or ()),
        name=doc.get("name") or "",
        state=doc["state"],
        created_at=created,
        updated_at=updated,
        secrets=tuple(
            SecretInfo(s["hash"], _aware(s["created_at"]) or created, _aware(s.get("expires_at")))
            for s in doc.get("secrets") or ()
        ),
        revoked_at=_aware(doc.get("revoked_at")),
    )


class ClientConflict(Exception):
    """The client changed under a concurrent rotation; the caller may retry."""


class ClientStore:
    """Single-document operations on ``clients`` (FerretDB has no transactions)."""

    def __init__(self, database: Database[Doc]) -> None:
        self._clients: Collection[ClientDoc] = typed_collection(database, CLIENTS_COLLECTION, ClientDoc)

    def ensure_indexes(self) -> None:
        self._clients.create_index([("tenant", ASCENDING), ("_id", ASCENDING)])

    def create(self, tenant: str | None, role: Role, name: str, *, pii: bool = False) -> tuple[ClientRecord, str]:
        if (tenant is None) != (role is Role.PLATFORM_ADMIN):
            raise ValueError("platform-admin clients have no tenant; every other client has one")
        client_id = f"mlc_{secrets.token_hex(12)}"
        secret = secrets.token_urlsafe(32)
        now = _now()
        doc: ClientDoc = {
            "_id": client_id,
            "tenant": tenant,
            "role": role.value,
            "scopes": [s.value for s in ROLE_SCOPES[role]] + ([Scope.PII_READ.value] if pii else []),
            "name": name,
            "state": "active",
            "secrets": [{"hash": hash_secret(secret), "created_at": now, "expires_at": None}],
            "created_at": now,
            "updated_at": now,
            "revoked_at": None,
        }
        self._clients.insert_one(doc)
        return _record(doc), secret

    def list_platform_admins(self, *, after: str | None, limit: int) -> list[ClientRecord]:
        """Platform-admin clients (active and revoked) in id order: they have no tenant, so :meth:`list` misses them."""
        query: Doc = {"tenant": None, "role": Role.PLATFORM_ADMIN.value}
        if after is not None:
            query["_id"] = {"$gt": after}
        return [_record(d) for d in self._clients.find(query).sort("_id", ASCENDING).limit(limit)]

    def get(self, client_id: str) -> ClientRecord | None:
        doc = self._clients.find_one({"_id": client_id})
        return _record(doc) if doc is not None else None

    def list(self, tenant: str, *, after: str | None, limit: int) -> list[ClientRecord]:
        query: Doc = {"tenant": tenant}
        if after is not None:
            query["_id"] = {"$gt": after}
        return [_record(d) for d in self._clients.find(query).sort("_id", ASCENDING).limit(limit)]

    def other_active_platform_admins(self, client_id: str) -> int:
        """How many active platform-admin clients there are besides ``client_id``."""
        return self._clients.count_documents(
            {"tenant": None, "role": Role.PLATFORM_ADMIN.value, "state": "active", "_id": {"$ne": client_id}}
        )

    def rotate(self, client_id: str, overlap_s: int) -> tuple[ClientRecord, str] | None:
        """A new secret; the current ones stay valid for ``overlap_s`` more seconds (0: revoked now)."""
        current = self.get(client_id)
        if current is None or not current.active:
            return None
        now = _now()
        secret = secrets.token_urlsafe(32)
        kept: list[ClientSecretDoc] = []
        if overlap_s > 0:
            until = now + timedelta(seconds=overlap_s)
            # Only the newest previous secret survives a rotation: never more than two valid secrets.
            for info in current.live_secrets(now)[:1]:
                expires = until if info.expires_at is None else min(info.expires_at, until)
                kept.append({"hash": info.hash, "created_at": info.created_at, "expires_at": expires})
        fresh: ClientSecretDoc = {"hash": hash_secret(secret), "created_at": now, "expires_at": None}
        doc = self._clients.find_one_and_update(
            {"_id": client_id, "state": "active", "updated_at": current.updated_at},
            {"$set": {"secrets": [fresh, *kept], "updated_at": now}},
            return_document=ReturnDocument.AFTER,
        )
        if doc is None:
            raise ClientConflict(client_id)
        return _record(doc), secret

    def revoke(self, client_id: str) -> ClientRecord | None:
        now = _now()
        doc = self._clients.find_one_and_update(
            {"_id": client_id},
            {"$set": {"state": "revoked", "secrets": [], "updated_at": now, "revoked_at": now}},
            return_document=ReturnDocument.AFTER,
        )
        return _record(doc) if doc is not None else None


class ClientCache:
    """A short TTL cache of client records for the resource server: is the token's client still active."""

    def __init__(self, store: ClientStore, ttl_s: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._store = store
        # Bounded: every registered client may present tokens, so the ids are not few.
        self._cache: TtlCache[str, ClientRecord | None] = TtlCache(ttl_s, max_entries=10_000, clock=clock)

    def get(self, client_id: str) -> ClientRecord | None:
        return self._cache.get(client_id, lambda: self._store.get(client_id))

    def invalidate(self, client_id: str) -> None:
        self._cache.invalidate(client_id)
