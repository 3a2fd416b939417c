"""Signing keys of the built-in authorization server, kept in the control plane (``metalake_control.signing_keys``).

One document per key: ``{_id: kid, alg, public_jwk, sealed, kek_id, created_at, retired_at, expires_at}``. The
private JWK is sealed with AES-256-GCM under a key derived (HKDF-SHA256) from ``settings.api.key_encryption_key``,
the kid as associated data, so a database dump alone cannot sign tokens and a sealed key cannot be moved to another
document. ``kek_id`` fingerprints the encryption key: a process only signs with keys it can open, so two deployments
with different keys never fight over which key is active.

Rotation: :meth:`SigningKeyStore.rotate` makes a new key active and retires the previous ones; a retired key stays in
the JWKS until every token it signed has expired (token lifetime plus leeway), then it is deleted.
"""

from __future__ import annotations

import base64
import json
import secrets
import threading
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from joserfc.jwk import ECKey, KeySet, RSAKey, import_key
from pymongo import DESCENDING
from pymongo.collection import Collection
from pymongo.database import Database

from control.auth.jwks import SigningKeyDoc, published_jwks, signing_keys
from control.auth.settings import ApiSettings
from metalake.mongo import Doc
from metalake.sealing import KeyEncryption, SealingError

SigningKey = RSAKey | ECKey


# The process cannot sign: no key encryption key is configured, or a stored key does not open with it. The sealing
# itself is the kernel's (metalake.sealing), shared with the tenants' secrets.
KeysUnavailable = SealingError


def _aware(value: datetime | None) -> datetime | None:
    # FerretDB hands datetimes back naive unless the client asked for tz_aware; they are UTC either way.
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)


def _generate(alg: str, kid: str) -> SigningKey:
    params: Any = {"kid": kid, "alg": alg, "use": "sig"}
    if alg == "ES256":
        return ECKey.generate_key("P-256", parameters=params, private=True)
    return RSAKey.generate_key(2048, parameters=params, private=True)


@dataclass(frozen=True)
class KeyInfo:
    kid: str
    alg: str
    created_at: datetime
    retired_at: datetime | None
    expires_at: datetime | None

    @property
    def active(self) -> bool:
        return self.retired_at is None


def _info(doc: SigningKeyDoc) -> KeyInfo:
    created = _aware(doc["created_at"])
    assert created is not None  # noqa: S101 - written by create
    return KeyInfo(doc["_id"], doc["alg"], created, _aware(doc.get("retired_at")), _aware(doc.get("expires_at")))


class SigningKeyStore:
    """The control-plane keys: the public JWKS for everyone, the active private key for the token endpoint."""

    def __init__(self, database: Database[Doc], settings: ApiSettings) -> None:
        self._keys: Collection[SigningKeyDoc] = signing_keys(database)
        self._settings = settings
        self._lock = threading.Lock()
        self._opened: dict[str, SigningKey] = {}

    def _encryption(self) -> KeyEncryption:
        # Read at use, not at construction: the key encryption key may be configured after the app was built.
        secret = self._settings.key_encryption_key
        if secret is None:
            raise KeysUnavailable("no key encryption key configured (METALAKE_API__KEY_ENCRYPTION_KEY)")
        return KeyEncryption(secret)

    def _now(self) -> datetime:
        return datetime.now(UTC)

    def jwks(self) -> dict[str, list[dict[str, Any]]]:
        """The public keys tokens may carry: the active ones and retired ones whose tokens have not expired yet."""
        return published_jwks(self._keys, self._now())

    def key_set(self) -> KeySet:
        return KeySet.import_key_set(self.jwks())  # type: ignore[arg-type]

    def keys(self) -> list[KeyInfo]:
        return [_info(doc) for doc in self._keys.find({}).sort("created_at", DESCENDING)]

    def signing_key(self) -> SigningKey:
        """The newest active key this process can open, created on first use."""
        enc = self._encryption()
        doc = self._keys.find_one(
            {"kek_id": enc.kek_id, "alg": self._settings.signing_alg, "retired_at": None},
            sort=[("created_at", DESCENDING)],
        )
        if doc is None:
            return self._create(enc)
        return self._open(enc, doc)

    def rotate(self) -> KeyInfo:
        """Make a new key active; retire the previous ones (kept in the JWKS until their tokens expired)."""
        enc = self._encryption()
        previous = [d["_id"] for d in self._keys.find({"kek_id": enc.kek_id, "retired_at": None}, {"_id": 1})]
        key = self._create(enc)
        now = self._now()
        grace = timedelta(seconds=self._settings.token_lifetime_s + self._settings.leeway_s)
        if previous:
            self._keys.update_many(
                {"_id": {"$in": previous}, "retired_at": None},
                {"$set": {"retired_at": now, "expires_at": now + grace}},
            )
        self._keys.delete_many({"expires_at": {"$ne": None, "$lte": now}})
        doc = self._keys.find_one({"_id": key.kid})
        assert doc is not None  # noqa: S101 - inserted above
        return _info(doc)

    def _create(self, enc: KeyEncryption) -> SigningKey:
        alg = self._settings.signing_alg
        kid = f"{datetime.now(UTC):%Y%m%d}-{secrets.token_hex(6)}"
        key = _generate(alg, kid)
        private = json.dumps(key.as_dict(private=True)).encode()
        doc: SigningKeyDoc = {
            "_id": kid,
            "alg": alg,
            "public_jwk": key.as_dict(private=False),
            "sealed": base64.b64encode(enc.seal(kid, private)).decode(),
            "kek_id": enc.kek_id,
            "created_at": self._now(),
            "retired_at": None,
            "expires_at": None,
        }
        self._keys.insert_one(doc)
        with self._lock:
            self._opened[kid] = key
        return key

    def _open(self, enc: KeyEncryption, doc: SigningKeyDoc) -> SigningKey:
        kid = str(doc["_id"])
        with self._lock:
            cached = self._opened.get(kid)
        if cached is not None:
            return cached
        jwk = json.loads(enc.open(kid, base64.b64decode(doc["sealed"])))
        key = import_key(jwk)
        if not isinstance(key, RSAKey | ECKey):
            raise KeysUnavailable(f"signing key {kid} is not an RSA or EC key")
        with self._lock:
            self._opened[kid] = key
        return key
