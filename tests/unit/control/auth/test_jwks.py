"""The JWKS cache under concurrency: one fetch in flight, outside the lock, so a slow issuer never stalls the checks
of tokens whose key is cached; unknown kids wait for the fetch in flight instead of starting their own, and start
at most one per ``min_refresh_s``."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

from joserfc.jwk import RSAKey

from control.auth.jwks import JwksCache, VerificationKey
from tests._support.fake_clock import FakeClock

_KEYS = {kid: RSAKey.generate_key(2048, parameters={"kid": kid, "alg": "RS256"}) for kid in ("a", "b")}


class _SlowIssuer:
    """Answers the first fetch at once, then holds every fetch until ``release`` is set."""

    def __init__(self) -> None:
        self.published = ["a"]
        self.calls = 0
        self.entered = threading.Event()
        self.release = threading.Event()

    def __call__(self) -> Mapping[str, Any]:
        self.calls += 1
        if self.calls > 1:
            self.entered.set()
            assert self.release.wait(10), "the test never released the issuer"
        return {"keys": [_KEYS[kid].as_dict(private=False) for kid in self.published]}


def _in_thread(cache: JwksCache, kid: str) -> tuple[threading.Thread, list[VerificationKey | None]]:
    out: list[VerificationKey | None] = []
    thread = threading.Thread(target=lambda: out.append(cache.get(kid)), daemon=True)
    thread.start()
    return thread, out


def test_a_cached_kid_is_answered_while_a_slow_refresh_is_in_flight() -> None:
    issuer = _SlowIssuer()
    cache = JwksCache(issuer, min_refresh_s=0, max_age_s=300)
    assert cache.get("a") is not None and cache.fetches == 1
    issuer.published = ["a", "b"]
    # An unknown kid starts a refresh; the issuer is slow.
    refresher, refreshed = _in_thread(cache, "b")
    assert issuer.entered.wait(5)
    # A token whose kid is cached does not wait for it (before the fix the lock was held for the whole fetch).
    checker, checked = _in_thread(cache, "a")
    checker.join(2)
    assert not checker.is_alive() and checked[0] is not None and checked[0].kid == "a"
    # Other unknown kids wait for the fetch in flight rather than starting another one.
    waiters = [_in_thread(cache, kid) for kid in ("b", "made-up", "b")]
    assert issuer.calls == 2 and cache.fetches == 2 and refresher.is_alive()
    issuer.release.set()
    refresher.join(5)
    for thread, _ in waiters:
        thread.join(5)
    assert refreshed[0] is not None and refreshed[0].kid == "b"
    assert [out[0].kid if out[0] else None for _, out in waiters] == ["b", None, "b"]
    assert issuer.calls == 2  # single flight: one fetch served every caller


def test_unknown_kid_refreshes_are_rate_limited_and_a_failed_one_keeps_the_keys() -> None:
    clock = FakeClock(1000.0)
    calls: list[int] = []
    failing = False

    def source() -> Mapping[str, Any]:
        calls.append(1)
        if failing:
            raise OSError("issuer down")
        return {"keys": [_KEYS["a"].as_dict(private=False)]}

    cache = JwksCache(source, min_refresh_s=10, max_age_s=300, clock=clock)
    assert cache.get("a") is not None
    for kid in ("x", "y", "z"):
        assert cache.get(kid) is None
    assert len(calls) == 1  # made-up kids within min_refresh_s: no fetch
    clock.now += 10
    failing = True
    assert cache.get("x") is None and len(calls) == 2
    # The failed refresh kept the cached keys, and the next one waits min_refresh_s again.
    assert cache.get("a") is not None and cache.get("y") is None and len(calls) == 2
