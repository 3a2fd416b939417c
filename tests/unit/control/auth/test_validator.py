"""The RFC 9068 validator against forged tokens: every attack of the issue's matrix is refused, the honest token
passes, and an unknown kid refreshes the JWKS at most once per interval."""

from __future__ import annotations

import time
from typing import Any

import pytest
from cryptography.hazmat.primitives import serialization
from joserfc.jwk import ECKey, RSAKey
from pydantic import ValidationError

from control.auth.jwks import JwksCache, KeySourceUnavailable
from control.auth.settings import ApiSettings, IssuerProfile
from control.auth.validator import AccessTokenValidator, InvalidToken
from tests._support.fake_clock import FakeClock
from tests._support.jwt_forge import AUDIENCE, ISSUER, claims, hs256_with_public_key, sign, unsigned


class Source:
    def __init__(self, *keys: RSAKey | ECKey) -> None:
        self.keys = list(keys)
        self.calls = 0

    def __call__(self) -> dict[str, Any]:
        self.calls += 1
        return {"keys": [k.as_dict(private=False) for k in self.keys]}


@pytest.fixture(scope="module")
def rsa() -> RSAKey:
    return RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "alg": "RS256", "use": "sig"}, private=True)


@pytest.fixture(scope="module")
def ec() -> ECKey:
    return ECKey.generate_key("P-256", parameters={"kid": "ec-1", "alg": "ES256", "use": "sig"}, private=True)


def make(source: Source, clock: FakeClock | None = None, leeway: int = 5) -> AccessTokenValidator:
    cache = JwksCache(source, min_refresh_s=10, max_age_s=300, clock=clock or FakeClock(1000.0))
    return AccessTokenValidator(cache, issuer=ISSUER, audience=AUDIENCE, leeway_s=leeway, tenant_claim="tenant")


HEADER = {"alg": "RS256", "typ": "at+jwt", "kid": "rsa-1"}


def test_an_honest_token_gives_its_principal(rsa: RSAKey, ec: ECKey) -> None:
    validator = make(Source(rsa, ec))
    verified = validator.validate(sign(rsa, HEADER, claims()))
    assert verified.principal.subject == "mlc_test"
    assert verified.principal.tenant == "acme"
    assert verified.principal.scopes == frozenset({"tenant:read", "sql:read"})
    assert verified.principal.token_id == "j1"
    assert verified.client_id == "mlc_test"
    es = validator.validate(sign(ec, {"alg": "ES256", "typ": "at+jwt", "kid": "ec-1"}, claims(aud=[AUDIENCE, "x"])))
    assert es.principal.subject == "mlc_test"


def _refused(validator: AccessTokenValidator, token: str, reason: str) -> None:
    with pytest.raises(InvalidToken) as err:
        validator.validate(token)
    assert reason in str(err.value)


def test_time_claims(rsa: RSAKey) -> None:
    validator = make(Source(rsa), leeway=5)
    now = int(time.time())
    _refused(validator, sign(rsa, HEADER, claims(exp=now - 60)), "expired")
    _refused(validator, sign(rsa, HEADER, claims(nbf=now + 60)), "not yet valid")
    _refused(validator, sign(rsa, HEADER, claims(exp=None)), "exp")
    # Within the leeway both ways: a little clock skew is tolerated.
    validator.validate(sign(rsa, HEADER, claims(exp=now - 2, nbf=now + 2)))


def test_issuer_audience_and_required_claims(rsa: RSAKey) -> None:
    validator = make(Source(rsa))
    _refused(validator, sign(rsa, HEADER, claims(iss="https://evil.test")), "iss")
    _refused(validator, sign(rsa, HEADER, claims(aud="another-api")), "aud")
    _refused(validator, sign(rsa, HEADER, claims(aud=None)), "aud")
    _refused(validator, sign(rsa, HEADER, claims(sub=None)), "sub")
    _refused(validator, sign(rsa, HEADER, claims(iat=None)), "iat")
    _refused(validator, sign(rsa, HEADER, claims(client_id=None)), "client_id")
    _refused(validator, sign(rsa, HEADER, claims(tenant=["a", "b"])), "tenant")


def test_alg_none_and_unlisted_algorithms(rsa: RSAKey) -> None:
    validator = make(Source(rsa))
    body = claims()
    _refused(validator, unsigned({"alg": "none", "typ": "at+jwt", "kid": "rsa-1"}, body, b"x"), "algorithm")
    _refused(validator, unsigned({"alg": "None", "typ": "at+jwt", "kid": "rsa-1"}, body, b"x"), "algorithm")
    _refused(validator, unsigned({"alg": "none", "typ": "at+jwt", "kid": "rsa-1"}, body), "not a signed JWT")
    _refused(validator, unsigned({"typ": "at+jwt", "kid": "rsa-1"}, body, b"x"), "algorithm")
    _refused(validator, unsigned({"alg": "RS512", "typ": "at+jwt", "kid": "rsa-1"}, body, b"x"), "algorithm")


def test_hs256_signed_with_the_public_key(rsa: RSAKey) -> None:
    validator = make(Source(rsa))
    public = rsa.public_key
    for encoding in (serialization.Encoding.PEM, serialization.Encoding.DER):
        fmt = serialization.PublicFormat.SubjectPublicKeyInfo
        token = hs256_with_public_key(public.public_bytes(encoding, fmt), HEADER, claims())
        _refused(validator, token, "algorithm")


def test_key_must_fit_the_algorithm(rsa: RSAKey, ec: ECKey) -> None:
    validator = make(Source(rsa, ec))
    # An ES256 header pointing at the RSA key: refused before any signature check.
    forged = unsigned({"alg": "ES256", "typ": "at+jwt", "kid": "rsa-1"}, claims(), b"x" * 64)
    _refused(validator, forged, "does not fit")


def test_wrong_typ(rsa: RSAKey) -> None:
    validator = make(Source(rsa))
    _refused(validator, sign(rsa, {**HEADER, "typ": "JWT"}, claims()), "typ")
    _refused(validator, sign(rsa, {"alg": "RS256", "kid": "rsa-1"}, claims()), "typ")
    validator.validate(sign(rsa, {**HEADER, "typ": "application/at+jwt"}, claims()))


def test_bad_signature_and_garbage(rsa: RSAKey) -> None:
    validator = make(Source(rsa))
    other = RSAKey.generate_key(2048, parameters={"kid": "rsa-1", "alg": "RS256"}, private=True)
    _refused(validator, sign(other, HEADER, claims()), "signature")
    head, body, sig = sign(rsa, HEADER, claims()).split(".")
    tampered = sign(rsa, HEADER, claims(tenant="someone-else")).split(".")[1]
    _refused(validator, f"{head}.{tampered}.{sig}", "signature")
    for garbage in ("", "a.b", "a.b.c.d", "!!!.e30.x", f"{body}.{body}.{sig}"):
        with pytest.raises(InvalidToken):
            validator.validate(garbage)
    _refused(validator, unsigned({**HEADER, "crit": ["x-ext"], "x-ext": 1}, claims(), b"x"), "critical")


def test_unknown_kid_refreshes_once_per_interval(rsa: RSAKey) -> None:
    clock = FakeClock(1000.0)
    source = Source(rsa)
    validator = make(source, clock)
    validator.validate(sign(rsa, HEADER, claims()))
    assert source.calls == 1
    # A rotated-in key the cache has not seen: one refresh finds it.
    new = RSAKey.generate_key(2048, parameters={"kid": "rsa-2", "alg": "RS256"}, private=True)
    source.keys.append(new)
    clock.now += 11
    validator.validate(sign(new, {**HEADER, "kid": "rsa-2"}, claims()))
    assert source.calls == 2
    # Made-up kids in a burst: refused without hammering the JWKS.
    for i in range(20):
        _refused(validator, sign(new, {**HEADER, "kid": f"bogus-{i}"}, claims()), "unknown signing key")
    assert source.calls == 2
    clock.now += 11
    _refused(validator, sign(new, {**HEADER, "kid": "bogus-x"}, claims()), "unknown signing key")
    assert source.calls == 3


def test_a_key_this_process_signs_with_is_trusted_before_the_next_refresh(rsa: RSAKey) -> None:
    clock = FakeClock(1000.0)
    source = Source(rsa)
    cache = JwksCache(source, min_refresh_s=10, max_age_s=300, clock=clock)
    validator = AccessTokenValidator(cache, issuer=ISSUER, audience=AUDIENCE, leeway_s=5, tenant_claim="tenant")
    validator.validate(sign(rsa, HEADER, claims()))
    # Rotated a moment after the last refresh: the spacing refuses a refresh, so the new key is unknown...
    new = RSAKey.generate_key(2048, parameters={"kid": "rsa-2", "alg": "RS256"}, private=True)
    source.keys.append(new)
    token = sign(new, {**HEADER, "kid": "rsa-2"}, claims())
    _refused(validator, token, "unknown signing key")
    # ...unless the token endpoint told the cache it signs with it; only the public half is kept.
    cache.remember(new)
    assert validator.validate(token).principal.subject == "mlc_test"
    assert cache.get("rsa-2") is not None and not cache.get("rsa-2").is_private  # type: ignore[union-attr]
    assert source.calls == 1
    # The next refresh keeps only what the source publishes.
    source.keys.remove(new)
    clock.now += 301
    _refused(validator, token, "unknown signing key")


def test_retired_key_drops_out_when_the_set_ages(rsa: RSAKey) -> None:
    clock = FakeClock(1000.0)
    source = Source(rsa)
    validator = make(source, clock)
    token = sign(rsa, HEADER, claims())
    validator.validate(token)
    source.keys.clear()
    validator.validate(token)  # still cached: the JWKS is not refetched per request
    clock.now += 301
    _refused(validator, token, "unknown signing key")


def test_scope_is_an_rfc9068_string_by_default(rsa: RSAKey) -> None:
    validator = make(Source(rsa))
    _refused(validator, sign(rsa, HEADER, claims(scope=42)), "scope")
    # A list, or scopes in another claim, are not RFC 9068's: refused, or not read, unless the issuer's profile says so.
    _refused(validator, sign(rsa, HEADER, claims(scope=["tenant:admin"])), "scope")
    assert validator.validate(sign(rsa, HEADER, claims(scope=None, scp=["tenant:admin"]))).principal.scopes == set()


OKTA = IssuerProfile(token_types=["at+jwt", "JWT"], allow_missing_typ=True, scope_claim="scp", scope_format="list")


def _with(source: Source, profile: IssuerProfile) -> AccessTokenValidator:
    cache = JwksCache(source, min_refresh_s=10, max_age_s=300, clock=FakeClock(1000.0))
    return AccessTokenValidator(
        cache, issuer=ISSUER, audience=AUDIENCE, leeway_s=5, tenant_claim="tenant", profile=profile
    )


def test_an_issuer_profile_accepts_its_typ_and_scope_shape_and_nothing_more(rsa: RSAKey) -> None:
    okta = _with(Source(rsa), OKTA)
    jwt_typ, no_typ = {**HEADER, "typ": "JWT"}, {"alg": "RS256", "kid": "rsa-1"}
    scp = claims(scope=None, scp=["tenant:admin", "sql:read"])
    for header in (jwt_typ, no_typ, HEADER, {**HEADER, "typ": "jwt"}):
        assert okta.validate(sign(rsa, header, scp)).principal.scopes == {"tenant:admin", "sql:read"}, header
    # Only the typ values it names; the scp array of strings only (a string there, or odd items, are malformed).
    _refused(okta, sign(rsa, {**HEADER, "typ": "JOSE"}, scp), "typ")
    _refused(okta, unsigned({**HEADER, "typ": 1}, scp, b"sig"), "typ")
    _refused(okta, sign(rsa, jwt_typ, claims(scope=None, scp="tenant:admin")), "scope")
    _refused(okta, sign(rsa, jwt_typ, claims(scope=None, scp=["tenant:admin", 3])), "scope")
    _refused(okta, sign(rsa, jwt_typ, claims(scope=None, scp=["tenant:admin sql:read"])), "scope")
    # The "scope" string is not read any more either: the profile names where the scopes are.
    assert okta.validate(sign(rsa, jwt_typ, claims(scope="tenant:admin"))).principal.scopes == set()
    # Everything else RFC 9068 asks still holds: the algorithm, the signature, iss, aud, exp.
    _refused(okta, unsigned({**jwt_typ, "alg": "none"}, scp), "not a signed JWT")
    _refused(okta, sign(rsa, jwt_typ, {**scp, "iss": "https://evil.test"}), "iss")
    _refused(okta, sign(rsa, jwt_typ, {**scp, "aud": "another-api"}), "aud")
    _refused(okta, sign(rsa, jwt_typ, {**scp, "exp": int(time.time()) - 60}), "expired")
    either = _with(Source(rsa), IssuerProfile(scope_claim="scp", scope_format="string_or_list"))
    assert either.validate(sign(rsa, HEADER, claims(scope=None, scp="a b"))).principal.scopes == {"a", "b"}
    assert either.validate(sign(rsa, HEADER, claims(scope=None, scp=["a"]))).principal.scopes == {"a"}
    _refused(either, sign(rsa, jwt_typ, claims()), "typ")  # its typ stays RFC 9068's


def test_issuer_profiles_apply_to_the_external_issuer_alone() -> None:
    idp = "https://idp.example.com"
    external = ApiSettings(external_issuer=idp, issuer_profiles={idp: OKTA})
    assert external.issuer_profiles[idp].token_types == ["at+jwt", "JWT"]
    # A profile for any other issuer, the built-in one above all, is a configuration error, not a silent loosening.
    with pytest.raises(ValidationError, match="issuer_profiles"):
        ApiSettings(issuer_profiles={"http://127.0.0.1:8000": OKTA})
    with pytest.raises(ValidationError, match="issuer_profiles"):
        ApiSettings(external_issuer=idp, issuer_profiles={idp: OKTA, "https://other.example.com": OKTA})
    with pytest.raises(ValidationError):
        IssuerProfile(token_types=[])


def test_a_failing_jwks_source_keeps_cached_keys_and_reports_when_there_are_none(rsa: RSAKey) -> None:
    clock = FakeClock(1000.0)
    source = Source(rsa)
    validator = make(source, clock)
    token = sign(rsa, HEADER, claims())
    validator.validate(token)

    def broken() -> dict[str, Any]:
        raise ConnectionError("issuer down")

    cache = JwksCache(broken, min_refresh_s=0, max_age_s=0, clock=clock)
    with pytest.raises(KeySourceUnavailable):
        cache.get("rsa-1")
    # A cache that has keys keeps using them while the source is down.
    validator._keys._source = broken  # type: ignore[attr-defined]
    clock.now += 301
    assert validator.validate(token).client_id == "mlc_test"
    # Keys that are not signature keys of an allowed type are skipped, not fatal.
    mixed = JwksCache(
        lambda: {"keys": [{"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"}, {"kty": "XYZ"}, rsa.as_dict(private=False)]},
        min_refresh_s=0,
        max_age_s=300,
        clock=clock,
    )
    assert mixed.get("hmac") is None and mixed.get("rsa-1") is not None
