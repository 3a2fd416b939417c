"""The one place Trino connection arguments come from: TLS verified against the configured CA, a service user's
password, impersonation of a tenant's user, a tenant's JWT, and the plain protocol only when HTTPS is off."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import SecretStr
from trino.auth import BasicAuthentication, JWTAuthentication

from metalake.settings import SettingMissing
from metalake.trino_connect import _VerifiedWith, connect_args, http_session
from metalake.trino_settings import TrinoSettings
from ops.settings import Settings


def _settings(**trino: Any) -> Settings:
    base = {"ca_file": Path("/etc/stack/ca.pem"), "passwords": {"metalake": SecretStr("p1"), "bench": SecretStr("p2")}}
    return Settings(trino=TrinoSettings(**{**base, **trino}))


def _basic(args: dict[str, Any]) -> tuple[str, str]:
    auth = args["auth"]
    assert isinstance(auth, BasicAuthentication)
    return auth._username, auth._password


def _ca(args: dict[str, Any]) -> object:
    adapter = args["http_session"].get_adapter("https://trino.example")
    assert isinstance(adapter, _VerifiedWith)
    return adapter._ca


def test_the_platform_user_connects_over_tls_with_its_password() -> None:
    args = connect_args(_settings())
    assert args["http_scheme"] == "https" and args["user"] == "metalake" and args["catalog"] == "lake"
    assert (args["host"], args["port"]) == ("127.0.0.1", 8080)
    assert _basic(args) == ("metalake", "p1")
    assert _ca(args) == "/etc/stack/ca.pem"
    assert "verify" not in args  # the session verifies: requests lets REQUESTS_CA_BUNDLE override a verify flag


def test_a_service_user_authenticates_as_itself() -> None:
    args = connect_args(_settings(), user="bench")
    assert args["user"] == "bench" and _basic(args) == ("bench", "p2")


def test_a_tenant_query_is_the_platform_user_impersonating_the_tenant_user() -> None:
    args = connect_args(_settings(), session_user="tenant.acme.pii")
    assert args["user"] == "tenant.acme.pii" and _basic(args) == ("metalake", "p1")


def test_a_token_authenticates_instead_of_a_password() -> None:
    args = connect_args(_settings(passwords={}), token="eyJ.x.y")
    auth = args["auth"]
    assert isinstance(auth, JWTAuthentication) and auth.token == "eyJ.x.y"
    assert "user" not in args  # the token names the user
    assert connect_args(_settings(passwords={}), token="t", session_user="tenant.a")["user"] == "tenant.a"


def test_a_missing_password_names_the_user_and_the_variable_never_a_value() -> None:
    with pytest.raises(SettingMissing, match=r"'metalake-tests'.*METALAKE_TRINO__PASSWORDS") as err:
        connect_args(_settings(), user="metalake-tests")
    assert "p1" not in str(err.value) and "p2" not in str(err.value)


def test_without_a_ca_file_the_system_trust_store_verifies() -> None:
    assert _ca(connect_args(_settings(ca_file=None))) is True


def test_https_off_is_plain_and_sends_no_credentials() -> None:
    args = connect_args(_settings(https=False), session_user="tenant.acme")
    assert args == {"host": "127.0.0.1", "port": 8080, "http_scheme": "http", "catalog": "lake", "user": "tenant.acme"}


def test_the_session_verifies_against_the_ca_even_with_requests_ca_bundle_set(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # requests would take REQUESTS_CA_BUNDLE over a session's verify; the adapter passes the CA to every send.
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "other.pem"))
    session = http_session(_settings())
    seen: dict[str, Any] = {}

    class Sent(Exception):
        pass

    def send(self: object, request: object, **kwargs: Any) -> None:
        seen.update(kwargs)
        raise Sent

    monkeypatch.setattr("requests.adapters.HTTPAdapter.send", send)
    with pytest.raises(Sent):
        session.get("https://trino.example/v1/info")
    assert seen["verify"] == "/etc/stack/ca.pem"
