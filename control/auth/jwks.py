"""Where a resource server gets verification keys: a JWKS, cached, refreshed when an unknown kid shows up.

The source is the built-in authorization server's public keys in the control plane (``metalake_control.signing_keys``,
written by ``api.auth.keys``; reading them needs no key encryption key) or an external OIDC issuer's JWKS, found
through its discovery document (:func:`verification_source`).

A token signed with a key the cache has not seen (the issuer just rotated) triggers one refresh; refreshes are spaced
by ``min_refresh_s`` so a stream of tokens with made-up kids cannot turn into a stream of JWKS fetches. The whole set
is also refetched after ``max_age_s`` so retired keys drop out. One fetch at a time, outside the cache's lock: a slow
issuer delays only the checks that need its answer, never those of tokens whose key is cached.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TypedDict

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import ECKey, KeySet, RSAKey
from pymongo import DESCENDING
from pymongo.collection import Collection
from pymongo.database import Database

from control.auth.settings import ApiSettings
from metalake.mongo import Doc, typed_collection

JwksSource = Callable[[], Mapping[str, Any]]
VerificationKey = RSAKey | ECKey

SIGNING_KEYS_COLLECTION = "signing_keys"

log = logging.getLogger(__name__)


class SigningKeyDoc(TypedDict):
    """A document of ``signing_keys``, written by ``api.auth.keys`` (which owns the private half) and read here for
    the public JWKS. ``retired_at`` and ``expires_at`` stay ``None`` while the key is active."""

    _id: str  # the kid
    alg: str
    public_jwk: dict[str, Any]
    # The private JWK, AES-256-GCM sealed under the key encryption key, base64.
    sealed: str
    # Fingerprint of the key encryption key that sealed it.
    kek_id: str
    created_at: datetime
    retired_at: datetime | None
    expires_at: datetime | None


def signing_keys(database: Database[Any]) -> Collection[SigningKeyDoc]:
    """The ``signing_keys`` collection of the control-plane ``database``."""
    return typed_collection(database, SIGNING_KEYS_COLLECTION, SigningKeyDoc)


class KeySourceUnavailable(RuntimeError):
    """The issuer's keys could not be fetched and none are cached: no token can be checked right now."""


class _Fetch:
    """One JWKS fetch in flight: the callers that need its result wait on ``done``."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None


class JwksCache:
    """The verification keys by kid, thread-safe, with one fetch in flight at a time.

    The fetch (an HTTP call to the issuer for an external one) runs outside the lock: a token whose kid is cached and
    fresh is answered at once while another thread waits for a slow issuer. A caller that needs the fetch (an unknown
    kid, or a set older than ``max_age_s``) starts it, or waits for the one in flight rather than starting another.
    """

    def __init__(
        self,
        source: JwksSource,
        *,
        min_refresh_s: float,
        max_age_s: float,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self._min_refresh_s = min_refresh_s
        self._max_age_s = max_age_s
        self._clock = clock
        self._lock = threading.Lock()
        self._keys: dict[str, VerificationKey] = {}
        # When the last fetch started: spaces unknown-kid refreshes and ages the set.
        self._fetched_at: float | None = None
        self._in_flight: _Fetch | None = None
        self.fetches = 0

    def get(self, kid: str) -> VerificationKey | None:
        now = self._clock()
        with self._lock:
            key = self._keys.get(kid)
            stale = self._fetched_at is None or now - self._fetched_at >= self._max_age_s
            if key is not None and not stale:
                return key
            flight = self._in_flight
            leader = flight is None
            if flight is None:
                may_refresh = stale or self._fetched_at is None or now - self._fetched_at >= self._min_refresh_s
                if not may_refresh:
                    return key  # an unknown kid within min_refresh_s of the last fetch: no fetch for made-up kids
                flight = self._in_flight = _Fetch()
                self._fetched_at = now
                self.fetches += 1
        if leader:
            self._fetch(flight)
        else:
            flight.done.wait()
        with self._lock:
            if flight.error is not None and not self._keys:
                raise KeySourceUnavailable(type(flight.error).__name__) from flight.error
            return self._keys.get(kid)

    def _fetch(self, flight: _Fetch) -> None:
        keys: dict[str, VerificationKey] | None = None
        try:
            keys = self._load()
        except Exception as exc:  # noqa: BLE001 - any failure of the source: keep the keys (or callers get KeySourceUnavailable)
            # The issuer blinked: keep verifying with the keys we have rather than refusing every token.
            flight.error = exc
            log.warning("jwks refresh failed; keeping %d cached keys", len(self._keys))
        finally:
            # Whatever happened, the waiters are released and the next caller may fetch again.
            with self._lock:
                if keys is not None:
                    self._keys = keys
                self._in_flight = None
            flight.done.set()

    def _load(self) -> dict[str, VerificationKey]:
        data = dict(self._source())
        keys: dict[str, VerificationKey] = {}
        for jwk in data.get("keys") or ():
            # Only public signature keys of the allowed families: an "oct" key in a JWKS is never a verification key.
            if not isinstance(jwk, dict) or jwk.get("kty") not in ("RSA", "EC") or jwk.get("use", "sig") != "sig":
                continue
            try:
                key = KeySet.import_key_set({"keys": [jwk]}).keys[0]
            except (JoseError, ValueError, TypeError):
                continue  # RFC 7517 §5: skip a key we cannot use, keep the others
            if isinstance(key, RSAKey | ECKey) and key.kid and not key.is_private:
                keys[key.kid] = key
        return keys

    def remember(self, key: VerificationKey) -> None:
        """Trust a key this process signs with before the next refresh would show it.

        Right after a rotation the token endpoint signs with a key the cache may not have fetched yet, and the refresh
        spacing would refuse the first tokens it issues. The key stays until the next refresh, which keeps only what
        the source publishes.
        """
        public = key.as_dict(private=False)
        imported = KeySet.import_key_set({"keys": [public]}).keys[0]
        if isinstance(imported, RSAKey | ECKey) and imported.kid:
            with self._lock:
                if imported.kid not in self._keys:
                    self._keys = {**self._keys, imported.kid: imported}


def http_jwks(url: str, *, timeout_s: float = 5.0) -> JwksSource:
    def fetch() -> Mapping[str, Any]:
        response = httpx.get(url, timeout=timeout_s, follow_redirects=False)
        response.raise_for_status()
        body = response.json()
        if not isinstance(body, dict) or not isinstance(body.get("keys"), list):
            raise ValueError(f"{url} is not a JWKS")
        return body

    return fetch


def discover_jwks_url(issuer: str, *, timeout_s: float = 5.0) -> str:
    """The ``jwks_uri`` of an OIDC issuer, from its discovery document (RFC 8414 metadata as a fallback)."""
    base = issuer.rstrip("/")
    for path in ("/.well-known/openid-configuration", "/.well-known/oauth-authorization-server"):
        response = httpx.get(base + path, timeout=timeout_s)
        if response.status_code != 200:
            continue
        meta = response.json()
        # The document must describe the issuer we were told to trust (OIDC Discovery §4.3).
        if isinstance(meta, dict) and meta.get("issuer") == issuer and isinstance(meta.get("jwks_uri"), str):
            return str(meta["jwks_uri"])
    raise ValueError(f"no usable discovery document for issuer {issuer}")


def published_jwks(keys: Collection[SigningKeyDoc], now: datetime) -> dict[str, list[dict[str, Any]]]:
    """The public keys tokens may carry: the active ones and retired ones whose tokens have not expired yet."""
    query: Doc = {"$or": [{"expires_at": None}, {"expires_at": {"$gt": now}}]}
    return {"keys": [dict(doc["public_jwk"]) for doc in keys.find(query).sort("created_at", DESCENDING)]}


def _stored_source(database: Database[Doc]) -> JwksSource:
    keys = signing_keys(database)
    return lambda: published_jwks(keys, datetime.now(UTC))


def _issuer_source(issuer: str) -> JwksSource:
    lock = threading.Lock()
    found: list[str] = []

    def fetch() -> Mapping[str, Any]:
        # Discovered on first use, not at startup: a service comes up even while the issuer is briefly unreachable.
        with lock:
            if not found:
                found.append(discover_jwks_url(issuer))
            url = found[0]
        return http_jwks(url)()

    return fetch


def verification_source(api: ApiSettings, database: Database[Doc]) -> JwksSource:
    """The keys that verify tokens for these settings: the external issuer's if one is configured (then it is the only
    trusted issuer), else the built-in authorization server's, read from the control plane ``database``."""
    return _issuer_source(api.external_issuer) if api.external_issuer else _stored_source(database)
