"""The authorization server's public endpoints: the token endpoint, the JWKS and the RFC 8414 metadata."""

from __future__ import annotations

import hashlib
from typing import Any
from urllib.parse import parse_qsl

from fastapi import APIRouter, Request, Response
from fastapi.concurrency import run_in_threadpool
from pymongo.errors import PyMongoError

from api.auth.deps import SCOPE_DESCRIPTIONS
from api.auth.keys import KeysUnavailable
from api.auth.runtime import AuthRuntime
from api.auth.server import AUTH_METHODS, claimed_client_ids
from api.context import ContextDep
from api.deps import AuthDep
from api.problems import MEDIA_TYPE, Problem
from api.schemas.oauth import Jwks, ServerMetadata, TokenResponse
from metalake.http.bodies import read_body

router = APIRouter(tags=["oauth"])


_MAX_FORM_BYTES = 8 * 1024


_OAUTH_ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "problem+json that also carries the RFC 6749 error members.",
    "required": ["type", "title", "status", "detail"],
    "properties": {
        "type": {"type": "string"},
        "title": {"type": "string"},
        "status": {"type": "integer"},
        "detail": {"type": "string"},
        "instance": {"type": "string"},
        "error": {"type": "string", "examples": ["invalid_client"]},
        "error_description": {"type": "string"},
        "retry_after": {"type": "integer"},
    },
}


def _oauth_error(description: str) -> dict[str, Any]:
    return {"description": description, "content": {MEDIA_TYPE: {"schema": _OAUTH_ERROR_SCHEMA}}}


_TOKEN_REQUEST_BODY: dict[str, Any] = {
    "required": True,
    "content": {
        "application/x-www-form-urlencoded": {
            "schema": {
                "type": "object",
                "required": ["grant_type"],
                "properties": {
                    "grant_type": {"type": "string", "enum": ["client_credentials"]},
                    "scope": {"type": "string", "description": "Space-separated subset of the client's scopes."},
                    "client_id": {"type": "string", "description": "For client_secret_post."},
                    "client_secret": {"type": "string", "description": "For client_secret_post."},
                },
            },
            "example": {"grant_type": "client_credentials", "scope": "tenant:read"},
        }
    },
}


def _throttle(request: Request, auth: AuthRuntime, form: dict[str, str]) -> list[str]:
    """Before any secret check (an scrypt run each): the peer's bucket bounds a flood of made-up client ids from one
    address; each claimed client id (decoded as authlib decodes it, under any spelling) is refused from this address
    once its failures from this address spent their budget. The failure keys are returned, charged if this attempt
    fails: charged per client alone, anyone knowing a client id could lock that client out from anywhere."""
    peer = request.client.host if request.client else "unknown"
    auth.token_peer_limiter.check("token-peer:" + peer)
    # Hashed: a claimed id is any string up to the form's 8 KiB, and the table holds up to 100,000 keys.
    claimed = sorted(claimed_client_ids(request.headers, form))
    keys = [f"token-fail:{hashlib.sha256(cid.encode()).hexdigest()[:32]}@{peer}" for cid in claimed]
    for key in keys:
        auth.token_failure_limiter.check(key, charge=False)
    return keys


def _answer(status: int, body: dict[str, Any], headers: list[tuple[str, str]], response: Response) -> TokenResponse:
    # authlib sets its own Content-Type; ours follows from the body we send.
    out = {k: v for k, v in headers if k.lower() != "content-type"}
    if status < 400:
        response.status_code = status
        response.headers.update(out)
        return TokenResponse.model_validate(body)
    error = str(body.get("error", "invalid_request"))
    description = str(body.get("error_description") or error.replace("_", " "))
    if error == "invalid_client":
        # One answer for unknown, wrong-secret, revoked and suspended clients: nothing to enumerate.
        description = "client authentication failed"
        if "www-authenticate" in {k.lower() for k in out}:
            out = {k: v for k, v in out.items() if k.lower() != "www-authenticate"}
            out["WWW-Authenticate"] = (
                f'Basic realm="metalake", error="invalid_client", error_description="{description}"'
            )
    body = {**body, "error_description": description}
    raise Problem(status, error.replace("_", "-"), description, extra=body, headers=out)


@router.post(
    "/oauth/token",
    summary="Issue an access token (client credentials)",
    description="RFC 6749 §4.4. Authenticate with HTTP Basic (client_secret_basic) or with client_id and "
    "client_secret in the form (client_secret_post). The token is an RFC 9068 JWT; errors carry RFC 6749 "
    "`error` members inside problem+json.",
    response_model=TokenResponse,
    responses={
        200: {
            "content": {
                "application/json": {
                    "example": {
                        "access_token": "eyJhbGciOiJSUzI1NiIsInR5cCI6ImF0K2p3dCIsImtpZCI6IjIwMjYxMTIyLWFiYyJ9...",
                        "token_type": "Bearer",
                        "expires_in": 900,
                        "scope": "tenant:read sql:read",
                    }
                }
            }
        },
        400: _oauth_error("invalid_request, unsupported_grant_type, invalid_scope or invalid_client"),
        401: _oauth_error("invalid_client: unknown client, wrong secret, revoked, or its tenant is suspended"),
        413: _oauth_error("the form is larger than 8 KiB"),
        415: _oauth_error("the body is not application/x-www-form-urlencoded"),
        429: _oauth_error("too many token requests for this client, or from this address"),
        503: _oauth_error("signing keys unavailable"),
    },
    openapi_extra={"requestBody": _TOKEN_REQUEST_BODY},
)
async def token(request: Request, response: Response, auth: AuthDep, ctx: ContextDep) -> TokenResponse:
    if auth.external:
        raise Problem(
            400,
            "external-issuer",
            "this API trusts tokens of an external issuer only; request tokens there",
            extra={"error": "invalid_request", "issuer": auth.settings.api.external_issuer},
        )
    content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type != "application/x-www-form-urlencoded":
        raise Problem(
            415,
            "unsupported-media-type",
            "send the token request as application/x-www-form-urlencoded",
            extra={"error": "invalid_request"},
        )
    # Refused on its declared length, else once the bytes read pass the limit: a chunked body is never read whole.
    too_large = Problem(413, "request-too-large", "the token request is too large", extra={"error": "invalid_request"})
    raw = await read_body(request, _MAX_FORM_BYTES, too_large)
    try:
        pairs = parse_qsl(raw.decode("utf-8"), keep_blank_values=True, strict_parsing=False)
    except UnicodeDecodeError:
        raise Problem(400, "invalid-request", "the form is not UTF-8", extra={"error": "invalid_request"}) from None
    form: dict[str, str] = {}
    for name, value in pairs:
        if name in form:
            # RFC 6749 §3.2: parameters must not be repeated.
            raise Problem(400, "invalid-request", f"{name}: repeated", field=name, extra={"error": "invalid_request"})
        form[name] = value
    failure_keys = _throttle(request, auth, form)
    try:
        # scrypt on the secret checks' own threads, never on the pool every route shares; full: 503 at once.
        status, body, headers = await ctx.secret_checks.run("token", auth.server.token, request.headers, form)
    except Problem as busy:
        busy.extra.setdefault("error", "temporarily_unavailable")
        raise
    except KeysUnavailable as exc:
        raise Problem(503, "signing-keys-unavailable", str(exc), extra={"error": "temporarily_unavailable"}) from None
    except PyMongoError:
        raise Problem(
            503, "auth-unavailable", "the control plane is unreachable", extra={"error": "temporarily_unavailable"}
        ) from None
    if body.get("error") == "invalid_client":
        for key in failure_keys:
            auth.token_failure_limiter.acquire(key)
    return _answer(status, body, headers, response)


@router.get(
    "/.well-known/jwks.json",
    summary="The public keys access tokens are signed with",
    response_model=Jwks,
    responses={
        200: {
            "content": {
                "application/json": {
                    "example": {
                        "keys": [{"kty": "RSA", "kid": "20261122-3f2a9c0d1e4b", "alg": "RS256", "use": "sig", "n": "…"}]
                    }
                }
            }
        },
        503: {"description": "the control plane is unreachable"},
    },
)
async def jwks(auth: AuthDep, response: Response) -> Jwks:
    try:
        keys = await run_in_threadpool(auth.keys.jwks)
    except PyMongoError:
        raise Problem(503, "auth-unavailable", "the control plane is unreachable") from None
    # Short caching: a rotated key must reach resource servers well within a token lifetime.
    response.headers["Cache-Control"] = "public, max-age=60"
    return Jwks.model_validate(keys)


def metadata_for(auth: AuthRuntime) -> ServerMetadata:
    issuer = auth.settings.api.issuer_url.rstrip("/")
    return ServerMetadata(
        issuer=auth.settings.api.issuer_url,
        token_endpoint=f"{issuer}/oauth/token",
        jwks_uri=f"{issuer}/.well-known/jwks.json",
        grant_types_supported=["client_credentials"],
        token_endpoint_auth_methods_supported=list(AUTH_METHODS),
        scopes_supported=list(SCOPE_DESCRIPTIONS),
        response_types_supported=["token"],
        token_endpoint_auth_signing_alg_values_supported=[auth.settings.api.signing_alg],
    )


@router.get(
    "/.well-known/oauth-authorization-server",
    summary="Authorization server metadata (RFC 8414)",
    response_model=ServerMetadata,
)
def oauth_metadata(auth: AuthDep) -> ServerMetadata:
    return metadata_for(auth)
