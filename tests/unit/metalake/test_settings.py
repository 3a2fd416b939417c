"""Settings: addresses derived from the stack's ports, explicit values winning, the stack env file."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from metalake.settings import load_settings
from ops.settings import Settings


@pytest.fixture(autouse=True)
def clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """No METALAKE_* variable from the caller's shell, no real stack.env, and a stack dir of our own."""
    for name in list(os.environ):
        if name.upper().startswith("METALAKE_"):
            monkeypatch.delenv(name)
    monkeypatch.setenv("METALAKE_ENV_FILE", str(tmp_path / "does-not-exist.env"))
    stack_dir = tmp_path / "stack"
    monkeypatch.setenv("METALAKE_STACK__DIR", str(stack_dir))
    return stack_dir


def test_defaults(clean_env: Path) -> None:
    settings = Settings()
    assert settings.kafka_bootstrap == "127.0.0.1:9092"
    assert settings.mongo_uri == "mongodb://127.0.0.1:27017/"
    assert settings.trino.host == "127.0.0.1"
    assert settings.trino.port == 8080
    assert settings.stack.ports.postgres == 55432
    # Paths have no default, not even into the stack's folder: the tooling sets them (ops.stack.paths).
    assert settings.lake.root is None and settings.lake.checkpoint_root is None
    assert settings.spark.jars_dir is None and settings.access.rules_file is None


def test_addresses_follow_the_ports(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_STACK__PORTS__KAFKA", "19092")
    monkeypatch.setenv("METALAKE_STACK__PORTS__FERRETDB", "27018")
    monkeypatch.setenv("METALAKE_STACK__PORTS__TRINO", "18080")
    settings = Settings()
    assert settings.stack.ports.kafka == 19092
    assert settings.kafka_bootstrap == "127.0.0.1:19092"
    assert settings.mongo_uri == "mongodb://127.0.0.1:27018/"
    assert settings.trino.port == 18080


def test_addresses_follow_the_host(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_STACK__HOST", "10.1.2.3")
    settings = Settings()
    assert settings.kafka_bootstrap == "10.1.2.3:9092"
    assert settings.mongo_uri == "mongodb://10.1.2.3:27017/"
    assert settings.trino.host == "10.1.2.3"


def test_explicit_addresses_win_over_ports(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("METALAKE_STACK__PORTS__KAFKA", "19092")
    monkeypatch.setenv("METALAKE_KAFKA__BOOTSTRAP_SERVERS", "broker-1:9092,broker-2:9092")
    monkeypatch.setenv("METALAKE_MONGO__URI", "mongodb://mongo.internal:27017/?tls=true")
    monkeypatch.setenv("METALAKE_TRINO__HOST", "trino.internal")
    monkeypatch.setenv("METALAKE_TRINO__PORT", "443")
    monkeypatch.setenv("METALAKE_LAKE__ROOT", str(tmp_path / "lake"))
    settings = Settings()
    assert settings.kafka_bootstrap == "broker-1:9092,broker-2:9092"
    assert settings.mongo_uri == "mongodb://mongo.internal:27017/?tls=true"
    assert settings.trino.host == "trino.internal"
    assert settings.trino.port == 443
    assert settings.lake_root == tmp_path / "lake"


def test_each_instance_derives_its_own_addresses(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_STACK__PORTS__KAFKA", "19092")
    first = Settings()
    monkeypatch.setenv("METALAKE_STACK__PORTS__KAFKA", "29092")
    second = Settings()
    assert first.kafka_bootstrap == "127.0.0.1:19092"
    assert second.kafka_bootstrap == "127.0.0.1:29092"


def test_nested_values(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_TELEMETRY__LOG_FORMAT", "text")
    monkeypatch.setenv("METALAKE_SPARK__MAX_OFFSETS_PER_TRIGGER", "500")
    settings = Settings()
    assert settings.telemetry.log_format == "text"
    assert settings.spark.max_offsets_per_trigger == 500


def test_invalid_literal_is_rejected(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_TELEMETRY__LOG_FORMAT", "xml")
    with pytest.raises(ValueError, match="log_format"):
        Settings()


def test_load_settings_without_env_file() -> None:
    assert load_settings(Settings).kafka_bootstrap == "127.0.0.1:9092"


def test_load_settings_reads_the_stack_env_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env_file = tmp_path / "stack.env"
    env_file.write_text("METALAKE_STACK__PORTS__KAFKA=19092\nMETALAKE_STACK__PORTS__TRINO=18080\n")
    monkeypatch.setenv("METALAKE_ENV_FILE", str(env_file))
    settings = load_settings(Settings)
    assert settings.kafka_bootstrap == "127.0.0.1:19092"
    assert settings.trino.port == 18080


def test_real_environment_wins_over_the_env_file(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    env_file = tmp_path / "stack.env"
    env_file.write_text("METALAKE_STACK__PORTS__KAFKA=19092\n")
    monkeypatch.setenv("METALAKE_ENV_FILE", str(env_file))
    monkeypatch.setenv("METALAKE_STACK__PORTS__KAFKA", "29092")
    assert load_settings(Settings).kafka_bootstrap == "127.0.0.1:29092"


def test_nothing_is_discovered_without_the_stack_dir(monkeypatch: pytest.MonkeyPatch) -> None:
    # Run from inside a checkout (the test's cwd), settings still find no .stack/: paths must be given.
    from metalake.settings import SettingMissing

    monkeypatch.delenv("METALAKE_STACK__DIR")
    settings = Settings()
    assert settings.stack.dir is None and settings.lake.root is None
    assert settings.kafka_bootstrap == "127.0.0.1:9092"
    with pytest.raises(SettingMissing, match="METALAKE_LAKE__ROOT"):
        _ = settings.lake_root
    with pytest.raises(SettingMissing, match="METALAKE_ACCESS__RULES_FILE"):
        _ = settings.access_rules_file
    monkeypatch.setenv("METALAKE_LAKE__ROOT", "/srv/lake")
    assert Settings().lake_root == Path("/srv/lake")


def test_fault_points_are_off_by_default_and_set_only_through_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from ops.settings import Settings
    from processors.settings import FaultSettings

    assert Settings().faults == FaultSettings()
    assert not Settings().faults.lake_only and Settings().faults.kill_after_delta is None
    monkeypatch.setenv("METALAKE_FAULTS__KILL_AFTER_DELTA", "7")
    monkeypatch.setenv("METALAKE_FAULTS__LAKE_ONLY", "1")
    faults = Settings().faults
    assert (faults.kill_after_delta, faults.lake_only) == (7, True)
