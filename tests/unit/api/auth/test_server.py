"""How a stored client answers authlib: scopes granted, auth methods, grant types."""

from __future__ import annotations

from datetime import UTC, datetime

from api.auth.server import OAuthClient
from control.auth.clients import ROLE_SCOPES, ClientRecord, Role, SecretInfo, hash_secret


def _client(role: Role = Role.READ_WRITE) -> OAuthClient:
    now = datetime.now(UTC)
    scopes = tuple(s.value for s in ROLE_SCOPES[role])
    secret = SecretInfo(hash_secret("s"), now, None)
    return OAuthClient(ClientRecord("mlc_1", "acme", role, scopes, "n", "active", now, now, (secret,)))


def test_scopes_default_to_the_role_and_never_grow() -> None:
    client = _client()
    assert client.get_allowed_scope(None) == "tenant:read sql:read events:write"
    assert client.get_allowed_scope("") == "tenant:read sql:read events:write"
    assert client.get_allowed_scope("events:write tenant:read") == "tenant:read events:write"
    assert client.get_allowed_scope("tenant:admin") is None
    assert client.get_allowed_scope("tenant:read platform:admin") is None


def test_only_confidential_client_credentials() -> None:
    client = _client()
    assert client.check_client_secret("s") and not client.check_client_secret("t")
    assert client.check_endpoint_auth_method("client_secret_basic", "token")
    assert client.check_endpoint_auth_method("client_secret_post", "token")
    assert not client.check_endpoint_auth_method("none", "token")
    assert not client.check_endpoint_auth_method("client_secret_basic", "introspection")
    assert client.check_grant_type("client_credentials")
    assert not client.check_grant_type("authorization_code") and not client.check_grant_type("password")
    assert not client.check_redirect_uri("https://evil.example") and not client.check_response_type("code")
