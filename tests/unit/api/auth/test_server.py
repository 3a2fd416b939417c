"""How a stored client answers authlib: scopes granted, auth methods, grant types."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from datetime import UTC, datetime
from unittest.mock import MagicMock

from starlette.datastructures import Headers

from api.auth.server import OAuthClient, _TokenGenerator, claimed_client_ids
from control.auth.clients import ROLE_SCOPES, ClientRecord, Role, SecretInfo, hash_secret
from control.auth.settings import ApiSettings


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


def _basic(user_and_secret: bytes, *, junk: str = "") -> Mapping[str, str]:
    encoded = base64.b64encode(user_and_secret).decode()
    return {"Authorization": "Basic " + junk.join(encoded)}


def test_claimed_client_ids_are_decoded_as_authlib_decodes_them() -> None:
    # Every spelling authlib turns into client "abc" is throttled as "abc": percent-encoded in Basic, base64 with
    # characters outside the alphabet (authlib's decoder skips them), any case of the scheme.
    for headers in (
        _basic(b"abc:wrong"),
        _basic(b"%61bc:wrong"),
        _basic(b"%61%62%63:wrong"),
        _basic(b"a%62c:wrong", junk="!"),
        # The route hands over Starlette's headers, whose names match in any case (as the ones authlib sees).
        Headers({"authorization": "bAsIc " + base64.b64encode(b"ab%63:wrong").decode()}),
    ):
        assert claimed_client_ids(headers, {}) == {"abc"}, headers
    # The form is decoded once by the route's parser and never again by authlib: its value is the id.
    assert claimed_client_ids({}, {"client_id": "abc", "client_secret": "x"}) == {"abc"}
    # authlib tries Basic, then the form: both ids may cost a secret check, so both count.
    assert claimed_client_ids(_basic(b"%61bc:x"), {"client_id": "def", "client_secret": "y"}) == {"abc", "def"}
    # Without a secret authlib checks none.
    assert claimed_client_ids(_basic(b"abc"), {"client_id": "def"}) == set()
    assert claimed_client_ids({"Authorization": "Basic %%%"}, {}) == set()


def _tenant_client(tenant: str | None, scopes: tuple[str, ...]) -> OAuthClient:
    now = datetime.now(UTC)
    secret = SecretInfo(hash_secret("s"), now, None)
    return OAuthClient(ClientRecord("mlc_2", tenant, Role.READ_ONLY, scopes, "n", "active", now, now, (secret,)))


def test_a_tenant_token_names_its_trino_user_the_pii_one_only_with_pii_read() -> None:
    generator = _TokenGenerator(MagicMock(), ApiSettings(), lambda key: None, "trino_user")
    plain = generator.get_extra_claims(
        _tenant_client("acme", ("sql:read", "pii:read")), "client_credentials", None, "sql:read"
    )
    assert plain["tenant"] == "acme" and plain["trino_user"] == "tenant.acme"
    pii = generator.get_extra_claims(
        _tenant_client("acme", ("pii:read",)), "client_credentials", None, "sql:read pii:read"
    )
    assert pii["trino_user"] == "tenant.acme.pii"
    # A platform client has no Trino user: Trino refuses its token (no principal claim).
    assert "trino_user" not in generator.get_extra_claims(_tenant_client(None, ()), "client_credentials", None, "")
    # Trino's JWT authenticator off: no claim at all.
    off = _TokenGenerator(MagicMock(), ApiSettings(), lambda key: None, None)
    assert "trino_user" not in off.get_extra_claims(_tenant_client("acme", ()), "client_credentials", None, "pii:read")


def test_only_a_token_with_sql_read_names_a_trino_user() -> None:
    """An ingest-only token (events:write) must not open Trino: no Trino user claim, so Trino refuses it."""
    generator = _TokenGenerator(MagicMock(), ApiSettings(), lambda key: None, "trino_user")
    writer = _tenant_client("acme", ("tenant:read", "sql:read", "events:write", "pii:read"))
    for scope in ("events:write", "tenant:read events:write", "pii:read events:write", "tenant:read"):
        claims = generator.get_extra_claims(writer, "client_credentials", None, scope)
        assert claims["tenant"] == "acme" and "trino_user" not in claims, scope
    assert generator.get_extra_claims(writer, "client_credentials", None, "sql:read")["trino_user"] == "tenant.acme"


def test_a_tenant_admin_token_names_the_admin_trino_user() -> None:
    """The audit trail and dead letters are tenant:admin's in Trino too: an admin token opens the admin user."""
    generator = _TokenGenerator(MagicMock(), ApiSettings(), lambda key: None, "trino_user")
    admin = _tenant_client("acme", ("tenant:admin", "tenant:read", "sql:read", "pii:read"))
    claims = generator.get_extra_claims(admin, "client_credentials", None, "tenant:admin sql:read")
    assert claims["trino_user"] == "tenant.acme.admin"
    claims = generator.get_extra_claims(admin, "client_credentials", None, "tenant:admin sql:read pii:read")
    assert claims["trino_user"] == "tenant.acme.admin.pii"
    # The same client asking for sql:read alone gets the ordinary user.
    assert generator.get_extra_claims(admin, "client_credentials", None, "sql:read")["trino_user"] == "tenant.acme"
