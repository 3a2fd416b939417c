"""The tenants' ingest write keys in MongoDB ``metalake_control.connector_secrets`` (``_id`` ``write-key/<key id>``):
only each key's SHA-256 is stored, the key is shown once, at creation, and checked in constant time."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from datetime import datetime
from typing import NotRequired, TypedDict

from pydantic import SecretStr
from pymongo.collection import Collection
from pymongo.database import Database

from control.connectors.records import WriteKeyGrant, WriteKeyInfo, utc_now
from control.connectors.secrets import SECRETS
from metalake.mongo import Doc, typed_collection
from tenants.naming import validate_tenant_id

WRITE_KEY_PREFIX = "mlk"


class WriteKeyDoc(TypedDict):
    """An ingest write key's document in ``connector_secrets`` (``_id`` is ``write-key/<key id>``)."""

    _id: str
    tenant: str
    key_id: str
    sha256: str
    created_at: datetime
    # The PII grant (absent on keys created before it existed: no grant).
    pii: NotRequired[bool]
    revoked: NotRequired[bool]
    revoked_at: NotRequired[datetime]


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


def parse_write_key(key: str) -> tuple[str, str] | None:
    """``(key_id, secret)`` of a key shaped ``mlk_<key id>_<secret>``, or ``None``."""
    parts = key.split("_", 2)
    if len(parts) != 3 or parts[0] != WRITE_KEY_PREFIX or not parts[1] or not parts[2]:
        return None
    return parts[1], parts[2]


class WriteKeys:
    """Each tenant's ingest write keys: created, checked, listed and revoked."""

    def __init__(self, database: Database[Doc]) -> None:
        self._write_keys: Collection[WriteKeyDoc] = typed_collection(database, SECRETS, WriteKeyDoc)

    def create(self, tenant: str, *, pii: bool = False) -> tuple[WriteKeyInfo, SecretStr]:
        """A new ingest write key for ``tenant``: its id, age and grant, and the key. Only its SHA-256 is stored: show
        the key once. ``pii`` lets it weaken PII masks (a tenant administrator's decision, fixed for the key's life:
        to change it, create another key and revoke this one)."""
        validate_tenant_id(tenant)
        info = WriteKeyInfo(key_id=secrets.token_hex(8), created_at=utc_now(), pii=pii)
        secret = secrets.token_urlsafe(32)
        self._write_keys.insert_one(
            {
                "_id": f"write-key/{info.key_id}",
                "tenant": tenant,
                "key_id": info.key_id,
                "sha256": _sha256(secret),
                "created_at": info.created_at,
                "pii": pii,
            }
        )
        return info, SecretStr(f"{WRITE_KEY_PREFIX}_{info.key_id}_{secret}")

    def check(self, key: SecretStr) -> WriteKeyGrant | None:
        """What a write key may do, or ``None`` if it is not a valid key. The secret part is compared in constant
        time."""
        parsed = parse_write_key(key.get_secret_value())
        if parsed is None:
            return None
        key_id, secret = parsed
        doc = self._write_keys.find_one({"_id": f"write-key/{key_id}"})
        if doc is None or doc.get("revoked"):
            return None
        if not hmac.compare_digest(_sha256(secret), str(doc.get("sha256", ""))):
            return None
        return WriteKeyGrant(tenant=doc["tenant"], key_id=key_id, pii=doc.get("pii") is True)

    def tenant_of(self, key: SecretStr) -> str | None:
        """The tenant a write key belongs to, or ``None`` (:meth:`check`)."""
        grant = self.check(key)
        return grant.tenant if grant is not None else None

    def of(self, tenant: str) -> list[WriteKeyInfo]:
        """The tenant's write keys that are not revoked, oldest first."""
        docs = self._write_keys.find({"tenant": tenant, "key_id": {"$exists": True}, "revoked": {"$ne": True}})
        keys = [WriteKeyInfo(key_id=d["key_id"], created_at=d["created_at"], pii=d.get("pii") is True) for d in docs]
        return sorted(keys, key=lambda k: (k.created_at, k.key_id))

    def revoke(self, tenant: str, key_id: str) -> bool:
        """Revoke one of the tenant's write keys (at once: the ingest API reads the store on every request); False
        if the tenant has no key of that id. Revoking a revoked key again is a success."""
        result = self._write_keys.update_one(
            {"_id": f"write-key/{key_id}", "tenant": tenant}, {"$set": {"revoked": True, "revoked_at": utc_now()}}
        )
        return result.matched_count == 1
