"""Access-token validation per RFC 9068 (JWT profile for OAuth 2 access tokens).

Checked before any signature work: the token is a compact JWS, its ``alg`` is on the allowlist (asymmetric only:
never ``none``, never an HMAC whose "secret" could be the public key), its ``typ`` is ``at+jwt``, and it names a
``kid`` the issuer's JWKS knows. Then the signature against that key (whose type must fit the alg), then the
claims: ``iss`` and ``aud`` exact, ``exp`` and ``nbf`` with a small leeway, ``sub``, ``client_id`` and ``iat``
present.
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

ALLOWED_ALGORITHMS: dict[str, type[RSAKey] | type[ECKey]] = {
    "RS256": RSAKey,
    "PS256": RSAKey,
    "ES256": ECKey,
}
ACCESS_TOKEN_TYPES = frozenset({"at+jwt", "application/at+jwt"})


class InvalidToken(Exception):
    """The token is not acceptable; the message says why in words safe to send back (no token content)."""


@dataclass(frozen=True)
class VerifiedToken:
    principal: Principal
    client_id: str
    claims: dict[str, Any]


def _b64json(segment: str) -> Any:
    padded = segment + "=" * (-len(segment) % 4)
    return json.loads(base64.urlsafe_b64decode(padded.encode("ascii")))


def _scopes(claims: dict[str, Any]) -> frozenset[str]:
    # RFC 9068 uses a space-separated "scope"; some external issuers send a list (often as "scp").
    raw = claims.get("scope", claims.get("scp", ""))
    if isinstance(raw, str):
        return frozenset(raw.split())
    if isinstance(raw, list) and all(isinstance(s, str) for s in raw):
        return frozenset(raw)
    raise InvalidToken("scope claim is malformed")


class AccessTokenValidator:
    def __init__(self, keys: JwksCache, *, issuer: str, audience: str, leeway_s: int, tenant_claim: str) -> None:
        self._keys = keys
        self._issuer = issuer
        self._audience = audience
        self._leeway_s = leeway_s
        self._tenant_claim = tenant_claim

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
        if not isinstance(typ, str) or typ.lower() not in ACCESS_TOKEN_TYPES:
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
            scopes=_scopes(claims),
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
