"""Erased URNs: the keyed hash an erasure records instead of the URN, and a tenant's set of erased URNs, by which the
dead letters still in Kafka are filtered.

**The hash** is HMAC-SHA256 under a key derived (HKDF) from the platform's key-encryption key, the one
``metalake.sealing`` uses (``secrets.key_encryption_key``, else ``api.key_encryption_key``): whoever reads an
erasure's status, an audit row or the ``asset.erased`` announcement cannot test candidate URNs against it without
the key (a plain sha256 of a URN is guessed by hashing likely names). Records written before it hold the plain
sha256, and records written under another configured KEK that KEK's HMAC: :meth:`UrnHasher.candidates` gives all of
them, so old records still match. A process configured without any KEK (a development setup) falls back to the plain
sha256; docs/security.md says so.

**The erased set** of a tenant is the ``erased_urns`` collection (``{_id: "<tenant>/<urn|tree>/<hash>", tenant,
target_hash, include_children, at}``, written by the erase before it deletes anything, whoever started it) and the
``erasures`` status documents (the API's requests, those from before ``erased_urns`` existed included). Both go with
the tenant (their ``_id`` starts with ``<tenant>/``).

Kafka records cannot be deleted one by one: a dead letter spelling an erased URN stays in its DLQ topic until the
topic's retention drops it. :class:`ErasedFilter` tells whether a letter's key, value or headers spell an erased URN
(or a URN under one erased with its children); the admin API leaves those letters out and refuses to replay them. A
URN is found by its text (``urn:metalake:<platform>:...``, JSON-escaped slashes too) and compared by hash, in its
canonical spelling and as written: a non-canonical spelling holding characters outside the URN alphabet (a space, a
quote) is not found.
"""

from __future__ import annotations

import hashlib
import hmac
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from pydantic import SecretStr
from pymongo.database import Database

from control.erasures import ERASURES_COLLECTION
from metalake.mongo import Doc
from metalake.sealing import Kek
from metalake.settings import KernelSettings
from metalake.urn import InvalidUrn, canonical_urn

ERASED_URNS = "erased_urns"
URN_HASH_INFO = b"metalake erased urn v1"
# A URN as text: the platform, then percent-encoded segments (canonical) or the unreserved characters a name may use.
_URN_TEXT = re.compile(r"urn:metalake:[a-z][a-z0-9_-]{0,63}:[A-Za-z0-9_%.~:/-]+")


def _sha256(value: str) -> str:
    return hashlib.sha256(value.encode()).hexdigest()


@dataclass(frozen=True)
class UrnHasher:
    """The keyed hash of URNs: ``keys`` are derived from the configured KEKs, the current one first; none: sha256."""

    keys: tuple[bytes, ...] = ()

    @property
    def keyed(self) -> bool:
        return bool(self.keys)

    def _mac(self, key: bytes, urn: str) -> str:
        return hmac.new(key, urn.encode(), hashlib.sha256).hexdigest()

    def digest(self, urn: str) -> str:
        """What a new record stores for ``urn``."""
        return self._mac(self.keys[0], urn) if self.keys else _sha256(urn)

    def candidates(self, urn: str) -> frozenset[str]:
        """Every hash a record about ``urn`` may hold: under each configured key, and the plain sha256 of old ones."""
        return frozenset({_sha256(urn), *(self._mac(k, urn) for k in self.keys)})


# No key: the plain sha256 (what records held before the keyed hash, and a process without a KEK still writes).
PLAIN = UrnHasher()


def urn_hasher(settings: KernelSettings) -> UrnHasher:
    """The process's hasher: the current KEK (as ``metalake.sealing.sealer_for`` picks it) first, then the others."""
    current = settings.secrets.key_encryption_key or settings.api.key_encryption_key
    others = [*settings.secrets.previous_key_encryption_keys, settings.api.key_encryption_key]
    if current is None:
        return PLAIN
    rest = tuple(s.get_secret_value() for s in others if s is not None and s != current)
    return _hasher(current.get_secret_value(), rest)


@lru_cache(maxsize=4)
def _hasher(current: str, rest: tuple[str, ...]) -> UrnHasher:
    keys = [Kek.of(SecretStr(v)).derived(URN_HASH_INFO) for v in (current, *rest)]
    return UrnHasher(tuple(dict.fromkeys(keys)))


def urns_in(chunks: Iterable[bytes | None]) -> set[str]:
    """The URNs spelled in raw bytes (read as UTF-8), a JSON-escaped slash read as a slash."""
    found: set[str] = set()
    for chunk in chunks:
        if chunk:
            text = chunk.decode("utf-8", "replace").replace("\\/", "/")
            found.update(m.rstrip("/") for m in _URN_TEXT.findall(text))
    return found


def _spellings(urn: str) -> set[str]:
    try:
        return {urn, canonical_urn(urn)}
    except InvalidUrn:
        return {urn}


@dataclass(frozen=True)
class ErasedSet:
    """The hashes of a tenant's erased URNs: ``exact`` went alone, ``trees`` with everything under them."""

    exact: frozenset[str] = frozenset()
    trees: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.exact or self.trees)

    def names(self, urn: str, hasher: UrnHasher) -> bool:
        """Whether ``urn`` (any spelling) was erased, or is under a URN erased with its children."""
        for spelled in _spellings(urn):
            hashes = hasher.candidates(spelled)
            if not (hashes.isdisjoint(self.exact) and hashes.isdisjoint(self.trees)):
                return True
            parts = spelled.split("/")
            if any(not hasher.candidates("/".join(parts[:i])).isdisjoint(self.trees) for i in range(1, len(parts))):
                return True
        return False


@dataclass
class ErasedFilter:
    """Whether raw records spell one of a tenant's erased URNs; remembers each URN's answer for one listing."""

    erased: ErasedSet
    hasher: UrnHasher
    _seen: dict[str, bool] = field(default_factory=dict)

    def spells_erased(self, chunks: Iterable[bytes | None]) -> bool:
        if not self.erased:
            return False
        for urn in urns_in(chunks):
            if urn not in self._seen:
                self._seen[urn] = self.erased.names(urn, self.hasher)
            if self._seen[urn]:
                return True
        return False


class ErasedUrns:
    """The ``erased_urns`` collection, and a tenant's erased set from it and the ``erasures`` status documents."""

    def __init__(self, database: Database[Doc]) -> None:
        self._erased = database[ERASED_URNS]
        self._erasures = database[ERASURES_COLLECTION]

    def add(self, tenant: str, target_hash: str, include_children: bool) -> None:
        kind = "tree" if include_children else "urn"
        doc = {"tenant": tenant, "target_hash": target_hash, "include_children": include_children}
        self._erased.replace_one(
            {"_id": f"{tenant}/{kind}/{target_hash}"}, {**doc, "at": datetime.now(UTC)}, upsert=True
        )

    def of(self, tenant: str) -> ErasedSet:
        projection = {"target_hash": 1, "include_children": 1}
        docs: list[Any] = [
            *self._erased.find({"tenant": tenant}, projection),
            *self._erasures.find({"tenant": tenant}, projection),
        ]
        hashes = [(str(d.get("target_hash") or ""), bool(d.get("include_children"))) for d in docs]
        return ErasedSet(
            frozenset(h for h, kids in hashes if h and not kids), frozenset(h for h, kids in hashes if h and kids)
        )
