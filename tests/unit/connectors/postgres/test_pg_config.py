"""Configuration and connection: defaults, schema selection, the password never leaking, and the SSRF rules (one
network host, the address guard before any connection, password authentication only, error classes not driver text).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import psycopg
import pytest
from pydantic import ValidationError

from connectors.postgres import PostgresCatalogConfig
from connectors.postgres.catalog import CatalogError, list_databases
from connectors.postgres.config import PASSWORD_AUTH
from control.connectors.plugin import SourceAccess
from control.connectors.reasons import public_failure
from metalake.net.ssrf import AddressGuard

SECRET = "s3cr3t-pw"


def _config(**kw: Any) -> PostgresCatalogConfig:
    return PostgresCatalogConfig(
        **{"host": "db.example.com", "user": "crawler", "password": SECRET, "instance": "prod", **kw}
    )


def test_defaults() -> None:
    config = _config()
    assert (config.port, config.platform, config.fetch_size, config.databases) == (5432, "postgres", 5000, None)
    for schema in ("pg_catalog", "information_schema", "pg_toast", "pg_toast_temp_1", "pg_temp_3"):
        assert not config.schema_selected(schema)
    assert config.schema_selected("public")
    assert config.schema_selected("pg")


def test_include_then_exclude() -> None:
    config = _config(include_schemas=["sales_*", "hr"], exclude_schemas=["*_tmp"])
    assert [s for s in ("sales_eu", "sales_tmp", "hr", "HR", "public") if config.schema_selected(s)] == [
        "sales_eu",
        "hr",
    ]


@pytest.mark.parametrize(
    "bad", [{"instance": ""}, {"platform": "Postgres"}, {"fetch_size": 0}, {"port": 0}, {"typo": 1}]
)
def test_invalid(bad: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        _config(**bad)


def test_instance_is_required() -> None:
    with pytest.raises(ValidationError):
        PostgresCatalogConfig(host="h", user="u", password="pw")  # type: ignore[call-arg]


def test_password_is_hidden_from_repr_dump_and_schema() -> None:
    config = _config(password=SECRET)
    assert SECRET not in repr(config)
    assert SECRET not in config.model_dump_json()
    assert SECRET not in str(PostgresCatalogConfig.model_json_schema())
    assert config.connect_kwargs("db", "93.184.216.34")["password"] == SECRET


PUBLIC = "93.184.216.34"


def _access(*addresses: str, allow: tuple[str, ...] = (), passwordless: bool = False) -> SourceAccess:
    """The policy with a resolver that answers ``addresses`` for any name (what DNS would say)."""
    return SourceAccess(AddressGuard.from_settings(allow, resolver=lambda host, port: list(addresses)), passwordless)


class FakePgConn:
    def __init__(self, used_password: bool) -> None:
        self.used_password = used_password


class FakeConnection:
    """What ``psycopg.connect`` returns, as far as connecting and listing databases go."""

    def __init__(self, used_password: bool = True) -> None:
        self.pgconn = FakePgConn(used_password)
        self.closed = False

    def close(self) -> None:
        self.closed = True

    def __enter__(self) -> FakeConnection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def execute(self, sql: str) -> FakeConnection:
        return self

    def fetchall(self) -> list[tuple[str]]:
        return [("shop",)]


class Recorder:
    def __init__(self, answer: FakeConnection | Exception | None = None) -> None:
        self.calls: list[dict[str, Any]] = []
        self.answer = answer if answer is not None else FakeConnection()

    def __call__(self, **kwargs: Any) -> FakeConnection:
        self.calls.append(kwargs)
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


@pytest.fixture
def connect(monkeypatch: pytest.MonkeyPatch) -> Recorder:
    recorder = Recorder()
    monkeypatch.setattr(psycopg, "connect", recorder)
    return recorder


# -- what a tenant may configure ---------------------------------------------------------------------------------

# libpq reads these as a Unix socket directory, an abstract socket, a list of hosts, or options: none is one host.
BAD_HOSTS = [
    "/var/run/postgresql",
    "/tmp",
    "@abstract-socket",
    "db1.example.com,db2.example.com",
    "db.example.com:5433",
    "db.example.com service=other",
    "host=10.0.0.1",
    "db example com",
    "db.example.com\n",
    "db.example.com\x00",
    "-db.example.com",
    "",
]


@pytest.mark.parametrize("host", BAD_HOSTS)
def test_a_host_that_is_not_one_network_host_is_refused(host: str) -> None:
    with pytest.raises(ValidationError) as caught:
        _config(host=host)
    assert caught.value.errors()[0]["loc"] == ("host",)


@pytest.mark.parametrize("host", ["db.example.com", "db-1.eu.example.com.", "10.0.0.5", "2001:db8::1", "[2001:db8::1]"])
def test_one_host_name_or_address_is_accepted_the_guard_judges_it_at_connect_time(host: str) -> None:
    assert _config(host=host).host == host


@pytest.mark.parametrize("field", ["maintenance_database", "databases"])
@pytest.mark.parametrize(
    "name", ["host=/tmp dbname=x", "service=internal", "passfile=/root/.pgpass", "postgresql://10.0.0.1/x"]
)
def test_a_database_name_that_reads_as_connection_options_is_refused(field: str, name: str) -> None:
    with pytest.raises(ValidationError):
        _config(**{field: [name] if field == "databases" else name})


@pytest.mark.parametrize("password", [None, ""])
def test_a_password_is_required(password: str | None) -> None:
    with pytest.raises(ValidationError) as caught:
        PostgresCatalogConfig(host="db.example.com", user="u", instance="i", password=password)  # type: ignore[arg-type]
    assert caught.value.errors()[0]["loc"] == ("password",)


# -- where a crawl connects --------------------------------------------------------------------------------------

REFUSED = ["127.0.0.1", "::1", "10.0.0.7", "192.168.1.1", "169.254.169.254", "fe80::1", "100.64.0.1", "fd00::5"]


@pytest.mark.parametrize("address", REFUSED)
def test_an_internal_address_is_refused_before_any_connection(connect: Recorder, address: str) -> None:
    for access in (_access(address), _access(PUBLIC, address)):  # alone, or smuggled in next to a public one
        with pytest.raises(CatalogError) as caught:
            list_databases(_config(), access)
        assert caught.value.error_class == "address-refused"
    with pytest.raises(CatalogError):  # the address written as the host: no DNS, same rule
        list_databases(_config(host=address), _access())
    assert connect.calls == []


def test_the_connection_goes_to_the_checked_address_with_the_name_kept_for_tls(connect: Recorder) -> None:
    assert list_databases(_config(sslmode="verify-full"), _access(PUBLIC)) == ["shop"]
    (kwargs,) = connect.calls
    assert kwargs["hostaddr"] == PUBLIC and kwargs["host"] == "db.example.com"
    assert kwargs["require_auth"] == PASSWORD_AUTH and kwargs["passfile"] == os.devnull
    assert kwargs["password"] == SECRET and kwargs["sslmode"] == "verify-full"


def test_the_operator_allowlist_lets_loopback_through(connect: Recorder) -> None:
    assert list_databases(_config(host="127.0.0.1"), _access(allow=("127.0.0.0/8",))) == ["shop"]
    assert connect.calls[0]["hostaddr"] == "127.0.0.1"


def test_a_server_that_does_not_ask_for_a_password_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    trusting = FakeConnection(used_password=False)
    monkeypatch.setattr(psycopg, "connect", Recorder(trusting))
    with pytest.raises(CatalogError) as caught:
        list_databases(_config(), _access(PUBLIC))
    assert caught.value.error_class == "authentication-failed" and trusting.closed
    assert "did not ask for a password" in str(caught.value)


def test_the_operator_may_allow_passwordless_sources(connect: Recorder) -> None:
    connect.answer = FakeConnection(used_password=False)
    assert list_databases(_config(), _access(PUBLIC, passwordless=True)) == ["shop"]
    assert "require_auth" not in connect.calls[0]


# -- what a tenant is told ---------------------------------------------------------------------------------------

PREFIX = 'connection failed: connection to server at "93.184.216.34", port 5432 failed: '
# What libpq says for: a closed port, a filtered one, a port that answers but is not PostgreSQL (HTTP, Redis), with
# and without TLS. A tenant must not tell them apart: one class and one message for all.
NOT_POSTGRES = [
    "Connection refused\n\tIs the server running on that host and accepting TCP/IP connections?",
    "timeout expired",
    "received invalid response to SSL negotiation: H",
    "expected authentication request from server, but received H",
    "expected authentication request from server, but received -",
    "server closed the connection unexpectedly",
    "No route to host",
]
AUTH = [
    'FATAL:  password authentication failed for user "crawler"',
    'FATAL:  role "crawler" does not exist',
    'FATAL:  no pg_hba.conf entry for host "1.2.3.4", user "crawler", database "postgres", SSL off',
    'authentication method requirement "password,md5,scram-sha-256" failed: server did not complete authentication',
]


def _failure(monkeypatch: pytest.MonkeyPatch, text: str) -> CatalogError:
    monkeypatch.setattr(psycopg, "connect", Recorder(psycopg.OperationalError(PREFIX + text + f" password={SECRET}")))
    with pytest.raises(CatalogError) as caught:
        list_databases(_config(), _access(PUBLIC))
    return caught.value


def test_a_closed_port_and_a_port_that_is_not_postgresql_look_the_same(monkeypatch: pytest.MonkeyPatch) -> None:
    shown = {public_failure(_failure(monkeypatch, text)) for text in NOT_POSTGRES}
    assert shown == {
        "unreachable: cannot connect to a PostgreSQL server at db.example.com:5432 (not reachable, or not PostgreSQL)"
    }


@pytest.mark.parametrize("text", AUTH)
def test_an_authentication_failure_is_its_class_without_the_driver_text(
    monkeypatch: pytest.MonkeyPatch, text: str
) -> None:
    failure = _failure(monkeypatch, text)
    assert failure.error_class == "authentication-failed"
    assert (
        str(failure)
        == "authentication-failed: the server refused the configured user and password at db.example.com:5432"
    )
    assert failure.__suppress_context__


def test_a_missing_database_is_a_database_error(monkeypatch: pytest.MonkeyPatch) -> None:
    failure = _failure(monkeypatch, 'FATAL:  database "postgres" does not exist')
    assert str(failure) == "database-error: the server at db.example.com:5432 refused to open database 'postgres'"


def test_the_operator_log_has_the_driver_text_without_the_password(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="connectors.postgres.catalog"):
        _failure(monkeypatch, "received invalid response to SSL negotiation: H")
    (record,) = [r for r in caplog.records if r.getMessage() == "postgres.connect_failed"]
    detail = record.__dict__["detail"]
    assert "SSL negotiation: H" in detail and SECRET not in detail and "password=***" in detail
    assert record.__dict__["address"] == PUBLIC and record.__dict__["error_class"] == "unreachable"


def test_a_name_that_does_not_resolve_is_unreachable_too(connect: Recorder) -> None:
    def no_such_name(host: str, port: int) -> list[str]:
        raise OSError("Name or service not known")

    with pytest.raises(CatalogError) as caught:
        list_databases(_config(), SourceAccess(AddressGuard(resolver=no_such_name)))
    assert caught.value.error_class == "unreachable" and connect.calls == []
