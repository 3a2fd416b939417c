"""Each process loads its own settings from its own variables only, and only entry points load settings."""

from __future__ import annotations

import ast
import os
from pathlib import Path
from typing import TypeVar

import pytest

from api.settings import AdminApiSettings
from connectors.settings import WorkerSettings
from metalake.sealing import sealer_for
from metalake.settings import KernelSettings, SettingMissing, load_settings
from metalake.trino_connect import connect_args
from ops.settings import Settings
from processors.access.settings import AccessProcessSettings
from processors.enrichment.settings import StreamSettings
from processors.lake.settings import LakeWorkerSettings
from processors.outbound.settings import OutboundProcessSettings
from processors.propagation.settings import PropagationProcessSettings

_R = TypeVar("_R", bound=KernelSettings)
ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("metalake", "catalog", "tenants", "control", "connectors", "processors", "api", "ops")
# The operator tooling's entry points: its commands, and the cached loader they share (ops.settings.get_settings).
ENTRY_POINTS = (ROOT / "ops" / "cli", ROOT / "ops" / "settings.py")
# Where the infrastructure is, as every deployment sets it (the kernel has no loopback defaults).
INFRA = {
    "METALAKE_KAFKA__BOOTSTRAP_SERVERS": "kafka-1:9092,kafka-2:9092",
    "METALAKE_MONGO__URI": "mongodb://mongo.internal:27017/",
    "METALAKE_TRINO__HOST": "trino.internal",
    "METALAKE_TRINO__PORT": "8443",
}


@pytest.fixture(autouse=True)
def only(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No METALAKE_* variable but the test's own, and an env file that sets nothing."""
    for name in list(os.environ):
        if name.upper().startswith("METALAKE_"):
            monkeypatch.delenv(name)
    empty = tmp_path / "empty.env"
    empty.write_text("")
    monkeypatch.setenv("METALAKE_ENV_FILE", str(empty))


def _load(root: type[_R], monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> _R:
    for name, value in {**INFRA, **variables}.items():
        monkeypatch.setenv(name, value)
    settings = load_settings(root)
    assert settings.kafka_bootstrap == INFRA["METALAKE_KAFKA__BOOTSTRAP_SERVERS"]
    assert settings.mongo_uri == INFRA["METALAKE_MONGO__URI"]
    assert (settings.trino.host, settings.trino.port) == ("trino.internal", 8443)
    return settings


def test_the_connector_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(
        WorkerSettings,
        monkeypatch,
        {
            "METALAKE_CONNECT__PORT": "9083",
            "METALAKE_CONNECT__SSRF_ALLOW": '["10.0.0.0/8"]',
            "METALAKE_API__AUDIENCE": "metalake-prod",
            "METALAKE_ACCESS__PII_TAGS": '["PII"]',
            "METALAKE_ENFORCEMENT__CACHE_TTL_S": "3",
        },
    )
    assert settings.connect.port == 9083
    assert settings.connect.ssrf_allow == ["10.0.0.0/8"]
    assert settings.api.audience == "metalake-prod"
    assert settings.access.pii_tags == ["PII"]
    assert settings.enforcement.cache_ttl_s == 3


def test_the_stream_job(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    settings = _load(
        StreamSettings,
        monkeypatch,
        {
            "METALAKE_LAKE__ROOT": str(tmp_path / "lake"),
            "METALAKE_LAKE__CHECKPOINT_ROOT": str(tmp_path / "checkpoints"),
            "METALAKE_SPARK__MASTER": "spark://spark.internal:7077",
            "METALAKE_ENRICHMENT__AUTO_CLASSIFY": "false",
            "METALAKE_FAULTS__LAKE_ONLY": "true",
        },
    )
    assert settings.lake_root == tmp_path / "lake"
    assert settings.checkpoint_root == tmp_path / "checkpoints"
    assert settings.spark.master == "spark://spark.internal:7077"
    assert settings.spark.scratch_dir is not None
    assert settings.enrichment.auto_classify is False
    assert settings.faults.lake_only is True


def test_the_admin_api(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(
        AdminApiSettings,
        monkeypatch,
        {
            "METALAKE_API__PORT": "8443",
            "METALAKE_API__KEY_ENCRYPTION_KEY": "k" * 44,
            "METALAKE_SQL__MAX_ROWS": "500",
            "METALAKE_DEAD_LETTERS__SCAN_MAX_RECORDS": "100",
            "METALAKE_ERASURE__QUEUE_MAX": "7",
            "METALAKE_OUTBOUND__TEST_EXPIRY_S": "60",
            "METALAKE_PROPAGATION__MAX_DEPTH": "4",
            "METALAKE_SNOWFLAKE__PII_ROLES": '["ANALYST"]',
            "METALAKE_CONNECT__SCHEDULE_MIN_INTERVAL_S": "60",
        },
    )
    assert settings.api.port == 8443
    assert sealer_for(settings) is not None
    assert settings.sql.max_rows == 500
    assert settings.dead_letters.scan_max_records == 100
    assert settings.erasure.queue_max == 7
    assert settings.outbound.test_expiry_s == 60
    assert settings.propagation.max_depth == 4
    assert settings.snowflake.pii_roles == ["ANALYST"]
    assert settings.connect.schedule_min_interval_s == 60


def test_the_lake_worker(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(
        LakeWorkerSettings,
        monkeypatch,
        {
            "METALAKE_ERASURE__CONCURRENCY": "3",
            "METALAKE_SPARK__DRIVER_MEMORY": "4g",
            "METALAKE_LAKE__S3__REGION": "eu-west-1",
        },
    )
    assert settings.erasure.concurrency == 3
    assert settings.spark.driver_memory == "4g"
    assert settings.lake.s3.region == "eu-west-1"


def test_propagation(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(
        PropagationProcessSettings,
        monkeypatch,
        {"METALAKE_PROPAGATION__GROUP_ID": "prop-2", "METALAKE_PROPAGATION__MAX_DEPTH": "3"},
    )
    assert settings.propagation.group_id == "prop-2"
    assert settings.propagation.max_depth == 3


def test_outbound(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _load(
        OutboundProcessSettings,
        monkeypatch,
        {"METALAKE_OUTBOUND__WORKERS": "2", "METALAKE_API__KEY_ENCRYPTION_KEY": "k" * 44},
    )
    assert settings.outbound.workers == 2
    # Sealed subscription secrets open with the API's key when secrets.key_encryption_key is unset.
    assert sealer_for(settings) is not None
    assert not hasattr(settings, "connect")


def test_access(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    rules = tmp_path / "rules.json"
    settings = _load(AccessProcessSettings, monkeypatch, {"METALAKE_ACCESS__RULES_FILE": str(rules)})
    assert settings.access_rules_file == rules


def test_an_address_unset_is_named_with_its_variable() -> None:
    settings = KernelSettings()
    with pytest.raises(SettingMissing, match="METALAKE_KAFKA__BOOTSTRAP_SERVERS"):
        _ = settings.kafka_bootstrap
    with pytest.raises(SettingMissing, match="METALAKE_MONGO__URI"):
        _ = settings.mongo_uri
    with pytest.raises(SettingMissing, match="METALAKE_TRINO__HOST"):
        connect_args(settings)


def _roots(root: type[KernelSettings]) -> set[type[KernelSettings]]:
    """``root`` and every root composed from it (``ops.settings.Settings`` composes them all)."""
    return {root}.union(*(_roots(sub) for sub in root.__subclasses__()))


def _loads_settings(tree: ast.AST) -> list[int]:
    """Lines that load settings: a call of load_settings or get_settings, or a settings root built directly."""
    roots = {root.__name__ for root in _roots(KernelSettings)}
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            func = node.func
            name = func.id if isinstance(func, ast.Name) else func.attr if isinstance(func, ast.Attribute) else ""
            if name in {"load_settings", "get_settings"} or name in roots:
                lines.append(node.lineno)
    return lines


def test_only_entry_points_load_settings() -> None:
    assert Settings in _roots(KernelSettings)
    offenders = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name in {"main.py", "__main__.py"} or any(path.is_relative_to(e) for e in ENTRY_POINTS):
                continue
            lines = _loads_settings(ast.parse(path.read_text(), str(path)))
            offenders += [f"{path.relative_to(ROOT)}:{line}" for line in lines]
    assert not offenders, offenders
