"""Secrets at rest: authenticated encryption under a key-encryption key (KEK) every deployable can open.

Two users, one key material. The API's signing keys (:class:`KeyEncryption`, kid as associated data) and the
third-party secrets tenants hand to metalake (:class:`Sealer`: connector passwords, webhook signing secrets, Slack and
Jira tokens, webhook HMAC keys), each sealed with AES-256-GCM under its own key derived (HKDF-SHA256) from the KEK.

A sealed secret is a document ``{"kek": <kek id>, "ct": <base64 of nonce + ciphertext>}``. Its associated data binds
the tenant, the object (``<collection>/<document id>``) and the field: a sealed value copied to another tenant,
object or field does not open. The KEK id (a fingerprint, never the key) says which KEK sealed it, so a process
configured with the current KEK and the previous ones (``secrets.previous_key_encryption_keys``) opens values sealed
under any of them, and ``metalake secrets reseal`` re-seals everything under the current one (see
docs/configuration.md). A plain string where a sealed document belongs (written before sealing existed) is refused
on read: the reseal pass seals it.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TypedDict, TypeGuard

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from pydantic import SecretStr

from metalake.settings import KernelSettings

MIN_KEK_LENGTH = 16
_NONCE = 12
_SECRETS_INFO = b"metalake secrets v1"
_AAD_PREFIX = b"metalake secret v1\x00"
RESEAL_HINT = "run `metalake secrets reseal` with the key that sealed it configured"


class SealingError(RuntimeError):
    """A secret cannot be sealed or opened: no KEK configured, a KEK too short, or a stored value that does not
    open (another KEK, another tenant/object/field, tampered, or plain text). Messages never hold a secret."""


class SealedValue(TypedDict):
    """A sealed secret as stored: the KEK's id and base64 of nonce + ciphertext (with its GCM tag)."""

    kek: str
    ct: str


def is_sealed(value: object) -> TypeGuard[SealedValue]:
    return (
        isinstance(value, Mapping)
        and set(value) == {"kek", "ct"}
        and isinstance(value.get("kek"), str)
        and isinstance(value.get("ct"), str)
    )


def _derive(raw: bytes, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(raw)


@dataclass(frozen=True)
class Kek:
    """A key-encryption key: its raw bytes and its id (a fingerprint of a separately derived value, which says
    which key sealed a value without revealing anything about the key)."""

    raw: bytes
    kek_id: str

    @classmethod
    def of(cls, secret: SecretStr, name: str = "key_encryption_key") -> Kek:
        raw = secret.get_secret_value().encode()
        if len(raw) < MIN_KEK_LENGTH:
            raise SealingError(f"{name} must be at least {MIN_KEK_LENGTH} characters")
        return cls(raw, hashlib.sha256(_derive(raw, b"metalake kek id v1")).hexdigest()[:16])

    def aead(self, info: bytes) -> AESGCM:
        return AESGCM(_derive(self.raw, info))

    def derived(self, info: bytes) -> bytes:
        """A 32-byte key for another use (a keyed hash), derived apart from every sealing key."""
        return _derive(self.raw, info)


class KeyEncryption:
    """Seals the API's private JWKs with a key derived from ``api.key_encryption_key``, the kid as associated data
    (api/auth/keys.py stores them; the format is unchanged since signing keys were first sealed)."""

    def __init__(self, secret: SecretStr) -> None:
        kek = Kek.of(secret, "api.key_encryption_key")
        self._aead = kek.aead(b"metalake signing keys v1")
        self.kek_id = kek.kek_id

    def seal(self, kid: str, plaintext: bytes) -> bytes:
        nonce = os.urandom(_NONCE)
        return nonce + self._aead.encrypt(nonce, plaintext, kid.encode())

    def open(self, kid: str, sealed: bytes) -> bytes:
        try:
            return self._aead.decrypt(sealed[:_NONCE], sealed[_NONCE:], kid.encode())
        except InvalidTag as exc:
            raise SealingError(f"signing key {kid} does not open with the configured key") from exc


@dataclass(frozen=True)
class Binding:
    """Where a sealed secret belongs: its tenant, its object (``<collection>/<document id>``) and its field."""

    tenant: str
    object: str
    field: str

    def aad(self) -> bytes:
        # JSON: unambiguous whatever characters the parts hold (a "/" in a field cannot shift it into the object).
        return _AAD_PREFIX + json.dumps([self.tenant, self.object, self.field]).encode()

    def __str__(self) -> str:
        return f"{self.object} field {self.field}"


class Sealer:
    """Seals tenants' secrets under the current KEK; opens values sealed under it or a previous one."""

    def __init__(self, current: SecretStr, previous: Sequence[SecretStr] = ()) -> None:
        kek = Kek.of(current, "secrets.key_encryption_key")
        self.kek_id = kek.kek_id
        self._aead = kek.aead(_SECRETS_INFO)
        self._openers: dict[str, AESGCM] = {kek.kek_id: self._aead}
        for index, secret in enumerate(previous):
            old = Kek.of(secret, f"secrets.previous_key_encryption_keys[{index}]")
            self._openers.setdefault(old.kek_id, old.aead(_SECRETS_INFO))

    def seal(self, value: str, binding: Binding) -> SealedValue:
        nonce = os.urandom(_NONCE)
        ciphertext = self._aead.encrypt(nonce, value.encode(), binding.aad())
        return {"kek": self.kek_id, "ct": base64.b64encode(nonce + ciphertext).decode()}

    def open(self, stored: object, binding: Binding) -> SecretStr:
        """The secret ``stored`` holds; :class:`SealingError` unless it is sealed, for ``binding``, under a KEK this
        process has. Plain text is refused, not trusted: anyone who can write the database could plant it."""
        if not is_sealed(stored):
            raise SealingError(f"{binding} is not sealed; {RESEAL_HINT}")
        aead = self._openers.get(stored["kek"])
        if aead is None:
            raise SealingError(f"{binding} is sealed under key {stored['kek']}, which is not configured; {RESEAL_HINT}")
        try:
            blob = base64.b64decode(stored["ct"], validate=True)
            return SecretStr(aead.decrypt(blob[:_NONCE], blob[_NONCE:], binding.aad()).decode())
        except (InvalidTag, ValueError) as exc:
            # A wrong binding and a tampered value fail alike: the tag cannot tell them apart, and need not.
            raise SealingError(f"{binding} does not open (moved, altered, or sealed for another object)") from exc

    def reseal(self, stored: object, binding: Binding) -> SealedValue | None:
        """``stored`` sealed under the current KEK, or ``None`` when it already is (and opens). A plain string (a
        value written before sealing) is sealed as it is; anything else that does not open raises."""
        if isinstance(stored, str):
            return self.seal(stored, binding)
        value = self.open(stored, binding)
        if is_sealed(stored) and stored["kek"] == self.kek_id:
            return None
        return self.seal(value.get_secret_value(), binding)


@dataclass
class ResealCount:
    """What a reseal pass did: values sealed from plain text, re-sealed from a previous KEK, already current; and
    the values (``<object> field <field>``) that did not open or whose document changed meanwhile (run it again)."""

    plain: int = 0
    rewrapped: int = 0
    current: int = 0
    failed: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)

    def each(
        self, keys: Sealer, values: Mapping[str, object], binding: Callable[[str], Binding]
    ) -> dict[str, object] | None:
        """``values`` with each one re-sealed under the current KEK, or ``None`` when none needed it. A value that
        does not open is kept as it is and counted failed (it may open once its KEK is configured)."""
        out, changed = dict(values), False
        for name, stored in values.items():
            where = binding(name)
            try:
                resealed = keys.reseal(stored, where)
            except SealingError:
                self.failed.append(str(where))
                continue
            if resealed is None:
                self.current += 1
                continue
            if isinstance(stored, str):
                self.plain += 1
            else:
                self.rewrapped += 1
            out[name], changed = resealed, True
        return out if changed else None

    def written(self, matched: bool, what: str) -> None:
        if not matched:
            self.conflicts.append(what)

    def merge(self, other: ResealCount) -> ResealCount:
        return ResealCount(
            self.plain + other.plain,
            self.rewrapped + other.rewrapped,
            self.current + other.current,
            self.failed + other.failed,
            self.conflicts + other.conflicts,
        )


def sealer_for(settings: KernelSettings) -> Sealer | None:
    """The process's sealer: ``secrets.key_encryption_key``, else ``api.key_encryption_key`` (a separate key is
    derived from it), with the previous KEKs; ``None`` when neither is set."""
    current = settings.secrets.key_encryption_key or settings.api.key_encryption_key
    if current is None:
        return None
    previous = tuple(p.get_secret_value() for p in settings.secrets.previous_key_encryption_keys)
    return _sealer(current.get_secret_value(), previous)


@lru_cache(maxsize=4)
def _sealer(current: str, previous: tuple[str, ...]) -> Sealer:
    # One per key configuration: the API builds a store per request, and HKDF per key per request is waste.
    return Sealer(SecretStr(current), [SecretStr(p) for p in previous])


def require(sealer: Sealer | None) -> Sealer:
    if sealer is None:
        raise SealingError(
            "no key-encryption key configured (METALAKE_SECRETS__KEY_ENCRYPTION_KEY or "
            "METALAKE_API__KEY_ENCRYPTION_KEY): secrets are never stored in clear"
        )
    return sealer
