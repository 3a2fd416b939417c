"""Access-token validation per RFC 9068 (JWT profile for OAuth 2 access tokens).

Checked before any signature work: the token is a compact JWS, its ``alg`` is on the allowlist (asymmetric only:
never ``none``, never an HMAC whose "secret" could be the public key), its ``typ`` is ``at+jwt``, and it names a
``kid`` the issuer's JWKS knows. Then the signature against that key (whose type must fit the alg), then the
claims: ``iss`` and ``aud`` exact, ``exp`` and ``nbf`` with a small leeway, ``sub``, ``client_id`` and ``iat``
present; the scopes are the space-separated string ``scope``.

An external issuer whose tokens differ (``typ: JWT`` or none, scopes as an ``scp`` array: Okta, Keycloak) has that
accepted by an explicit profile of its own (``api.issuer_profiles``); without one, and always for the built-in issuer,
the RFC 9068 rules hold.
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from joserfc import jwt
from joserfc.errors import ExpiredTokenError, JoseError, MissingClaimError
from joserfc.jwk import ECKey, RSAKey
from joserfc.jwt import JWTClaimsRegistry

from control.auth.jwks import JwksCache
from control.auth.principal import Principal
from control.auth.settings import IssuerProfile

ALLOWED_ALGORITHMS: dict[str, type[RSAKey] | type[ECKey]] = {
    "RS256": RSAKey,
    "PS256": RSAKey,
    "ES256": ECKey,
}


class InvalidToken(Exception):
    """The token is not acceptable; the message says why in words safe to send back (no token content)."""


@dataclass(frozen=True)
class VerifiedToken:
    principal: Principal
    client_id: str
    claims: dict[str, Any]


def _b64json(segment: str) -> Any:  # noqa: ANN401
    padded = segment + "=" * (-len(segment) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


RFC9068 = IssuerProfile()


def _scopes(claims: dict[str, Any], profile: IssuerProfile) -> frozenset[str]:
    # RFC 9068: a space-separated "scope" string. Another claim or shape only where the issuer's profile says so.
    raw = claims.get(profile.scope_claim)
    if raw is None:
        return frozenset()
    if isinstance(raw, str) and profile.scope_format in ("string", "string_or_list"):
        return frozenset(raw.split())
    if isinstance(raw, list) and profile.scope_format in ("list", "string_or_list"):
        if all(isinstance(s, str) and s and not any(c.isspace() for c in s) for s in raw):
            return frozenset(raw)
    raise InvalidToken("scope claim is malformed")


class AccessTokenValidator:
    """Validates the tokens of one issuer; ``profile`` is that issuer's token shape (RFC 9068's unless configured)."""

    def __init__(
        self,
        keys: JwksCache,
        *,
        issuer: str,
        audience: str,
        leeway_s: int,
        tenant_claim: str,
        profile: IssuerProfile = RFC9068,
    ) -> None:
        self._keys = keys
        self._issuer = issuer
        self._audience = audience
        self._leeway_s = leeway_s
        self._tenant_claim = tenant_claim
        self._profile = profile
        self._token_types = frozenset(t.lower() for t in profile.token_types)

    def header(self, token: str) -> dict[str, Any]:
        parts = token.split(".")
        if len(parts) != 3 or not all(parts):
            raise InvalidToken("not a signed JWT")
        try:
            header = _b64json(parts[0])
        except (ValueError, UnicodeError, binascii.Error) as exc:
            raise InvalidToken("malformed token header") from exc
        if not isinstance(header, dict):
            raise InvalidToken("malformed token header")
        return header

    def validate(self, token: str) -> VerifiedToken:
        header = self.header(token)
        alg = header.get("alg")
        if not isinstance(alg, str) or alg not in ALLOWED_ALGORITHMS:
            raise InvalidToken("signing algorithm not allowed")
        typ = header.get("typ")
        if typ is None and not self._profile.allow_missing_typ:
            raise InvalidToken("not an access token (typ must be at+jwt)")
        if typ is not None and (not isinstance(typ, str) or typ.lower() not in self._token_types):
            raise InvalidToken("not an access token (typ must be at+jwt)")
        if "crit" in header:
            raise InvalidToken("critical header parameters are not supported")
        kid = header.get("kid")
        if not isinstance(kid, str) or not kid:
            raise InvalidToken("token has no key id")
        key = self._keys.get(kid)
        if key is None:
            raise InvalidToken("unknown signing key")
        if not isinstance(key, ALLOWED_ALGORITHMS[alg]) or key.get("alg", alg) != alg:
            raise InvalidToken("signing key does not fit the algorithm")
        try:
            decoded = jwt.decode(token, key, algorithms=[alg])
        except (JoseError, ValueError) as exc:
            raise InvalidToken("bad signature") from exc
        claims = dict(decoded.claims)
        registry = JWTClaimsRegistry(
            leeway=self._leeway_s,
            iss={"essential": True, "value": self._issuer},
            aud={"essential": True, "value": self._audience},
            exp={"essential": True},
            iat={"essential": True},
            sub={"essential": True},
        )
        try:
            registry.validate(claims)
        except JoseError as exc:
            raise InvalidToken(_claim_reason(exc)) from exc
        client_id = claims.get("client_id")
        if not isinstance(client_id, str) or not client_id:
            raise InvalidToken("token has no client_id")
        tenant = claims.get(self._tenant_claim)
        if tenant is not None and not isinstance(tenant, str):
            raise InvalidToken("tenant claim is malformed")
        jti = claims.get("jti")
        principal = Principal(
            subject=str(claims["sub"]),
            tenant=tenant or None,
            scopes=_scopes(claims, self._profile),
            token_id=jti if isinstance(jti, str) else None,
        )
        return VerifiedToken(principal=principal, client_id=client_id, claims=claims)


def _claim_reason(exc: JoseError) -> str:
    # joserfc names the claim and the rule ("expired_token", "invalid_claim: 'aud'"); never a claim value.
    if isinstance(exc, ExpiredTokenError):
        return "token expired"
    claim = getattr(exc, "claim", None)
    if claim == "nbf":
        return "token not yet valid"
    if isinstance(exc, MissingClaimError):
        return f"missing claim {claim}"
    return f"invalid claim {claim}" if claim else "invalid claims"
