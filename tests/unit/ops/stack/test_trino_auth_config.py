"""The local Trino's HTTPS and authentication files (HTTPS only, password file, JWT of the API's issuer), the secrets
the stack generates for them, and the impersonation rules."""

from __future__ import annotations

import hashlib
import json
import re
import stat
from pathlib import Path

import pytest
from cryptography import x509
from pydantic import SecretStr

from control.auth.settings import ApiSettings
from metalake.settings import SettingMissing
from metalake.trino_settings import TrinoJwtSettings, TrinoSettings
from ops.settings import Settings
from ops.stack.manager import TRINO_PASSWORDS, StackManager
from ops.stack.paths import with_stack_paths
from ops.stack.services.base import ServiceError, StackContext
from ops.stack.services.trino import Trino, jwt_properties, pbkdf2_hash
from ops.stack.settings import StackSettings
from tenants.access.rules import TENANT_USERS, build_rules
from tenants.naming import trino_user
from tenants.trino_schemas import UNKEYED

PASSWORDS = {"metalake": "pw-platform", "metalake-tests": "pw-tests", "bench": "pw-bench"}


def _settings(tmp_path: Path, **trino: object) -> Settings:
    base: dict[str, object] = {
        "shared_secret": SecretStr("internal-secret-0123456789"),
        "passwords": {u: SecretStr(p) for u, p in PASSWORDS.items()},
    }
    return with_stack_paths(
        Settings(stack=StackSettings(dir=tmp_path / ".stack"), trino=TrinoSettings(**{**base, **trino}))
    )


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def test_trino_serves_https_only_with_the_stack_certificate_and_both_authenticators(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    ctx = StackContext(settings, tmp_path)
    Trino().prepare(ctx)
    etc = ctx.run_dir("trino") / "etc"
    config = _properties(etc / "config.properties")
    port = settings.stack.ports.trino
    # No HTTP listener: nothing is served in clear.
    assert config["http-server.http.enabled"] == "false" and "http-server.http.port" not in config
    assert config["http-server.https.enabled"] == "true" and config["http-server.https.port"] == str(port)
    assert config["discovery.uri"] == f"https://127.0.0.1:{port}"
    assert config["internal-communication.https.required"] == "true"
    assert config["internal-communication.shared-secret"] == "internal-secret-0123456789"
    assert config["http-server.authentication.type"] == "PASSWORD,JWT"
    # The keystore is the stack CA's certificate for Trino's addresses, with its key.
    bundle = Path(config["http-server.https.keystore.path"]).read_bytes()
    assert b"PRIVATE KEY" in bundle
    cert = x509.load_pem_x509_certificates(bundle)[0]
    ca = x509.load_pem_x509_certificate((tmp_path / ".stack" / "tls" / "ca.pem").read_bytes())
    cert.verify_directly_issued_by(ca)
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    # The JWT authenticator trusts the API's own issuer and reads the Trino user from the claim the API writes.
    assert config["http-server.authentication.jwt.key-file"] == "http://127.0.0.1:8000/.well-known/jwks.json"
    assert config["http-server.authentication.jwt.required-issuer"] == "http://127.0.0.1:8000"
    assert config["http-server.authentication.jwt.required-audience"] == "metalake-api"
    assert config["http-server.authentication.jwt.principal-field"] == "trino_user"
    # The secret it holds keeps the file (and the password file) owner-only.
    assert stat.S_IMODE((etc / "config.properties").stat().st_mode) == 0o600
    assert _properties(etc / "password-authenticator.properties") == {
        "password-authenticator.name": "file",
        "file.password-file": str(etc / "password.db"),
    }
    assert config["password-authenticator.config-files"] == str(etc / "password-authenticator.properties")


def test_the_password_file_holds_a_pbkdf2_hash_per_service_user_never_the_password(tmp_path: Path) -> None:
    ctx = StackContext(_settings(tmp_path), tmp_path)
    Trino().prepare(ctx)
    db = ctx.run_dir("trino") / "etc" / "password.db"
    assert stat.S_IMODE(db.stat().st_mode) == 0o600
    lines = dict(line.split(":", 1) for line in db.read_text().splitlines())
    assert set(lines) == set(PASSWORDS)
    for user, hashed in lines.items():
        assert PASSWORDS[user] not in db.read_text()
        iterations, salt, digest = hashed.split(":")
        # What Trino 476's file authenticator computes: PBKDF2 with HMAC-SHA1, key length of the stored hash.
        expected = hashlib.pbkdf2_hmac("sha1", PASSWORDS[user].encode(), bytes.fromhex(salt), int(iterations))
        assert digest == expected.hex() and int(iterations) >= 1000
    assert pbkdf2_hash("x", salt=b"\0" * 16, iterations=1000).startswith("1000:" + "00" * 16 + ":")


def test_a_service_user_without_a_password_or_a_missing_shared_secret_stops_the_start(tmp_path: Path) -> None:
    no_password = _settings(tmp_path, passwords={"metalake": SecretStr("p")})
    with pytest.raises(ServiceError, match="no password for service user 'metalake-tests'"):
        Trino().prepare(StackContext(no_password, tmp_path))
    with pytest.raises(ServiceError, match="shared_secret"):
        Trino().prepare(StackContext(_settings(tmp_path / "b", shared_secret=None), tmp_path / "b"))


def test_an_external_issuer_needs_its_jwks_url_and_maps_a_configurable_claim(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    settings.api = ApiSettings(external_issuer="https://idp.example/realms/x")
    with pytest.raises(SettingMissing, match="METALAKE_TRINO__JWT__JWKS_URL"):
        jwt_properties(settings)
    # Trusting the issuer's user claim is an explicit choice (it must name the same tenant as the tenant claim).
    settings.trino.jwt = TrinoJwtSettings(
        jwks_url="https://idp.example/realms/x/certs",
        audience="trino",
        user_claim="preferred_username",
        user_mapping_pattern="(tenant\\..*)",
        user_from="user_claim",
    )
    lines = dict(line.split("=", 1) for line in jwt_properties(settings))
    assert lines == {
        "http-server.authentication.jwt.key-file": "https://idp.example/realms/x/certs",
        "http-server.authentication.jwt.required-issuer": "https://idp.example/realms/x",
        "http-server.authentication.jwt.required-audience": "trino",
        "http-server.authentication.jwt.principal-field": "preferred_username",
        "http-server.authentication.jwt.user-mapping.pattern": "(tenant\\..*)",
    }
    # Its JWKS is the issuer's: the local API need not be up before Trino.
    assert Trino().needs_at_start(StackContext(settings, tmp_path)) == ()
    assert Trino().needs_at_start(StackContext(_settings(tmp_path), tmp_path)) == ("api",)


def test_an_external_issuers_tokens_get_the_trino_user_of_their_tenant_claim(tmp_path: Path) -> None:
    """An external issuer's tenant claim and Trino user claim could disagree (a token of tenant a naming tenant.b):
    by default Trino takes the user from the tenant claim, as tenant.<id>, through a user-mapping file."""
    settings = _settings(tmp_path)
    settings.api = ApiSettings(external_issuer="https://idp.example/realms/x", tenant_claim="org")
    settings.trino.jwt = TrinoJwtSettings(jwks_url="https://idp.example/realms/x/certs", user_claim="trino_user")
    Trino().prepare(StackContext(settings, tmp_path))
    etc = StackContext(settings, tmp_path).run_dir("trino") / "etc"
    config = _properties(etc / "config.properties")
    assert config["http-server.authentication.jwt.principal-field"] == "org"
    mapping_file = Path(config["http-server.authentication.jwt.user-mapping.file"])
    assert mapping_file == etc / "jwt-user-mapping.json"
    assert "http-server.authentication.jwt.user-mapping.pattern" not in config
    [rule] = json.loads(mapping_file.read_text())["rules"]

    def mapped(principal: str) -> str | None:
        # Trino's semantics: the whole principal must match; ``$1`` is the group.
        match = re.fullmatch(rule["pattern"], principal)
        return rule["user"].replace("$1", match.group(1)) if match else None

    assert mapped("acme") == trino_user("acme") and mapped("acme-eu") == trino_user("acme-eu")
    # Nothing else becomes a Trino user: not another tenant's PII or admin user, not a service user.
    for principal in ("acme.pii", "acme.admin", "tenant.b", "Acme", "ab", "acme\n", ""):
        assert mapped(principal) is None, principal
    assert mapped("metalake") == "tenant.metalake"  # a tenant's user, never the service user metalake
    # The API's own issuer keeps its user claim: metalake signs both claims itself.
    own = dict(line.split("=", 1) for line in jwt_properties(_settings(tmp_path)))
    assert own["http-server.authentication.jwt.principal-field"] == "trino_user"


def test_https_off_is_the_plain_port_without_authentication(tmp_path: Path) -> None:
    ctx = StackContext(_settings(tmp_path, https=False), tmp_path)
    Trino().prepare(ctx)
    config = _properties(ctx.run_dir("trino") / "etc" / "config.properties")
    assert config["http-server.http.port"] == str(ctx.settings.stack.ports.trino)
    assert not any(k.startswith(("http-server.https", "http-server.authentication")) for k in config)
    assert Trino().needs_at_start(ctx) == ()


def test_only_the_platform_user_may_impersonate_and_only_tenants_users() -> None:
    rules = build_rules(["metalake", "bench"], [], catalog="lake", schemas=UNKEYED, impersonator="metalake")
    assert rules["impersonation"] == [
        {"original_user": "^(metalake)$", "new_user": TENANT_USERS, "allow": True},
        {"original_user": ".*", "new_user": ".*", "allow": False},
    ]
    # Trino expands '$<n>' in new_user: the pattern must hold no '$' (Trino matches the whole name anyway).
    assert "$" not in TENANT_USERS
    for user in (trino_user("acme"), trino_user("acme", pii=True), trino_user("a-1-b")):
        assert re.fullmatch(TENANT_USERS, user), user
    for user in ("metalake", "bench", "tenant.acme.pii.x", "xtenant.acme", "tenant.ACME", "tenant.a", "tenant."):
        assert not re.fullmatch(TENANT_USERS, user), user
    assert build_rules(["metalake"], [], catalog="lake", schemas=UNKEYED)["impersonation"] == [
        {"original_user": ".*", "new_user": ".*", "allow": False}
    ]


def test_the_stack_generates_trino_secrets_once_and_every_client_reads_them(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in ("METALAKE_TRINO__SHARED_SECRET", TRINO_PASSWORDS, "METALAKE_TRINO__CA_FILE"):
        monkeypatch.delenv(key, raising=False)
    lines: list[str] = []
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack")))
    manager = StackManager(settings, tmp_path, echo=lines.append)
    manager._write_env_file()
    env_file = tmp_path / ".stack" / "stack.env"
    first = env_file.read_text()
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    manager._write_env_file()
    assert env_file.read_text() == first
    assert lines == []
    # The stack's own settings took them (it renders Trino's files right after).
    assert settings.trino.shared_secret is not None
    assert set(settings.trino.passwords) == {"metalake", "metalake-tests", "bench"}
    monkeypatch.setenv("METALAKE_ENV_FILE", str(env_file))
    from metalake.settings import load_settings

    loaded = load_settings(Settings).trino
    assert loaded.ca_file == tmp_path / ".stack" / "tls" / "ca.pem"
    assert {u: p.get_secret_value() for u, p in loaded.passwords.items()} == {
        u: p.get_secret_value() for u, p in settings.trino.passwords.items()
    }
    assert len({p.get_secret_value() for p in loaded.passwords.values()}) == 3
    # A service user added later gets a password; the others keep theirs.
    kept = json.loads(next(x for x in first.splitlines() if x.startswith(TRINO_PASSWORDS)).partition("=")[2].strip("'"))
    settings.access.service_users = [*settings.access.service_users, "reporting"]
    manager._write_env_file()
    line = next(x for x in env_file.read_text().splitlines() if x.startswith(TRINO_PASSWORDS))
    now = json.loads(line.partition("=")[2].strip("'"))
    assert set(now) == {*kept, "reporting"} and all(now[u] == kept[u] for u in kept)
