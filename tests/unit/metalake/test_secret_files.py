"""Secret settings from files (``METALAKE_<SETTING>_FILE``): what Compose secrets and Kubernetes Secrets mount."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metalake.secret_files import SecretFileError, secret_variables
from metalake.settings import load_settings
from ops.settings import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in list(os.environ):
        if name.upper().startswith("METALAKE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("METALAKE_ENV_FILE", str(tmp_path / "does-not-exist.env"))


def _secret(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_a_secret_setting_is_read_from_its_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METALAKE_KAFKA__SASL_PASSWORD_FILE", _secret(tmp_path, "kafka", "s3cret\n"))
    monkeypatch.setenv("METALAKE_API__KEY_ENCRYPTION_KEY_FILE", _secret(tmp_path, "kek", "k" * 43))
    settings = load_settings(Settings)
    assert settings.kafka.sasl_password is not None
    # One trailing line break dropped (echo and editors add it), nothing else.
    assert settings.kafka.sasl_password.get_secret_value() == "s3cret"
    assert settings.api.key_encryption_key is not None
    assert settings.api.key_encryption_key.get_secret_value() == "k" * 43


def test_a_dict_of_secrets_takes_json(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METALAKE_TRINO__PASSWORDS_FILE", _secret(tmp_path, "pw", '{"metalake": "a", "access": "b"}'))
    passwords = Settings().trino.passwords
    assert {user: p.get_secret_value() for user, p in passwords.items()} == {"metalake": "a", "access": "b"}


def test_the_variable_wins_over_its_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METALAKE_TRINO__SHARED_SECRET_FILE", _secret(tmp_path, "shared", "from-file"))
    monkeypatch.setenv("METALAKE_TRINO__SHARED_SECRET", "from-env")
    secret = Settings().trino.shared_secret
    assert secret is not None and secret.get_secret_value() == "from-env"


def test_the_file_wins_over_the_env_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env_file = tmp_path / "stack.env"
    env_file.write_text("METALAKE_TRINO__SHARED_SECRET=from-env-file\n")
    monkeypatch.setenv("METALAKE_ENV_FILE", str(env_file))
    monkeypatch.setenv("METALAKE_TRINO__SHARED_SECRET_FILE", _secret(tmp_path, "shared", "from-file"))
    secret = load_settings(Settings).trino.shared_secret
    assert secret is not None and secret.get_secret_value() == "from-file"


def test_settings_that_are_paths_keep_their_names(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """``TRINO__CA_FILE`` is a path setting, not the file of a ``TRINO__CA`` secret; a non-secret setting has no
    ``_FILE`` twin (its file is not read)."""
    monkeypatch.setenv("METALAKE_TRINO__CA_FILE", str(tmp_path / "ca.pem"))
    monkeypatch.setenv("METALAKE_KAFKA__BOOTSTRAP_SERVERS_FILE", _secret(tmp_path, "bootstrap", "elsewhere:1"))
    settings = Settings()
    assert settings.trino.ca_file == tmp_path / "ca.pem"
    assert settings.kafka_bootstrap == "127.0.0.1:9092"


def test_an_unreadable_file_is_named_by_its_variable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METALAKE_KAFKA__SASL_PASSWORD_FILE", str(tmp_path / "missing"))
    with pytest.raises(SecretFileError, match="METALAKE_KAFKA__SASL_PASSWORD_FILE"):
        Settings()


def test_every_secret_setting_has_a_file_twin() -> None:
    variables = secret_variables(Settings)
    assert {
        "METALAKE_KAFKA__SASL_PASSWORD",
        "METALAKE_KAFKA__OAUTH_CLIENT_SECRET",
        "METALAKE_TRINO__PASSWORDS",
        "METALAKE_TRINO__SHARED_SECRET",
        "METALAKE_LAKE__S3__SECRET_ACCESS_KEY",
        "METALAKE_API__KEY_ENCRYPTION_KEY",
        "METALAKE_SECRETS__PREVIOUS_KEY_ENCRYPTION_KEYS",
    } <= variables
    assert "METALAKE_KAFKA__BOOTSTRAP_SERVERS" not in variables
    assert "METALAKE_TRINO__CA_FILE" not in variables
