"""The authorization server's bodies: the token answer (RFC 6749), the key set (RFC 7517) and the server metadata
(RFC 8414). Keys and metadata allow members beyond the ones declared, as the RFCs do."""

from __future__ import annotations

from pydantic import BaseModel, Field


class TokenResponse(BaseModel):
    # authlib's member order, so the answer is the bytes authlib would send.
    token_type: str = Field(description="Always Bearer.", examples=["Bearer"])
    access_token: str = Field(description="An RFC 9068 JWT (typ at+jwt).")
    expires_in: int = Field(description="Seconds until the token expires.", examples=[900])
    scope: str = Field(description="The granted scopes, space-separated.", examples=["tenant:read sql:read"])


class Jwk(BaseModel):
    model_config = {"extra": "allow"}
    kty: str
    kid: str
    alg: str
    use: str = "sig"


class Jwks(BaseModel):
    keys: list[Jwk]


class ServerMetadata(BaseModel):
    model_config = {"extra": "allow"}
    issuer: str
    token_endpoint: str
    jwks_uri: str
    grant_types_supported: list[str]
    token_endpoint_auth_methods_supported: list[str]
    scopes_supported: list[str]
    response_types_supported: list[str]
    token_endpoint_auth_signing_alg_values_supported: list[str]
