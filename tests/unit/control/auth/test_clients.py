"""API clients: secret hashing, live secrets, the scopes of each role. Pure functions, no database."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from control.auth.clients import ROLE_SCOPES, ClientRecord, Role, SecretInfo, hash_secret, verify_secret
from control.auth.principal import Scope


def test_hash_is_salted_and_verifies() -> None:
    a, b = hash_secret("s3cret"), hash_secret("s3cret")
    assert a != b and a.startswith("scrypt$")
    assert "s3cret" not in a
    assert verify_secret("s3cret", a) and verify_secret("s3cret", b)
    assert not verify_secret("s3cret!", a)
    assert not verify_secret("s3cret", "garbage")
    assert not verify_secret("s3cret", "md5$1$2$3$AAAA$AAAA")


def _record(*secrets: SecretInfo, state: str = "active") -> ClientRecord:
    now = datetime.now(UTC)
    return ClientRecord("mlc_x", "acme", Role.READ_ONLY, ("tenant:read",), "n", state, now, now, secrets)


def test_record_accepts_live_secrets_only() -> None:
    now = datetime.now(UTC)
    current = SecretInfo(hash_secret("new"), now, None)
    previous = SecretInfo(hash_secret("old"), now, now + timedelta(hours=1))
    expired = SecretInfo(hash_secret("older"), now, now - timedelta(seconds=1))
    record = _record(current, previous, expired)
    assert record.verify("new") and record.verify("old")
    assert not record.verify("older") and not record.verify("nope")
    assert not _record(current, state="revoked").verify("new")


def test_roles_map_to_scopes() -> None:
    assert set(ROLE_SCOPES[Role.READ_ONLY]) == {Scope.TENANT_READ, Scope.SQL_READ}
    assert Scope.EVENTS_WRITE in ROLE_SCOPES[Role.READ_WRITE] and Scope.TENANT_ADMIN not in ROLE_SCOPES[Role.READ_WRITE]
    assert Scope.TENANT_ADMIN in ROLE_SCOPES[Role.ADMIN] and Scope.PLATFORM_ADMIN not in ROLE_SCOPES[Role.ADMIN]
    assert ROLE_SCOPES[Role.PLATFORM_ADMIN] == (Scope.PLATFORM_ADMIN,)
