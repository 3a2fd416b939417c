"""The Compose deployment and the images, offline: compose.yaml's services against the Containerfile's targets, and
the state folder ``python -m ops.compose generate`` renders. Building and running them is ``make images`` /
``make compose-up`` (docs/deploy.md), never part of the tests."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.compose import layout
from ops.compose.__main__ import generate

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "deploy" / "compose" / "compose.yaml"
CONTAINERFILE = REPO / "deploy" / "images" / "Containerfile"
BUILD = REPO / "deploy" / "images" / "build.sh"
# The deployables of docs/deploy.md: every one is an image and a Compose service.
DEPLOYABLES = {"api", "connect", "stream", "lake-worker", "propagation", "outbound", "access"}
SERVICES = {"kafka", "trino", "postgres", "ferretdb"}


def _compose() -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load(COMPOSE.read_text())
    return doc


def _targets() -> set[str]:
    return set(re.findall(r"^FROM \S+ AS (\S+)$", CONTAINERFILE.read_text(), flags=re.MULTILINE))


def _image_target(service: dict[str, Any]) -> str:
    match = re.fullmatch(r"localhost/metalake/([a-z-]+):\$\{METALAKE_TAG\}", service["image"])
    assert match, service["image"]
    return match.group(1)


def test_every_deployable_and_service_has_an_image_and_a_compose_service() -> None:
    services = _compose()["services"]
    assert DEPLOYABLES | SERVICES <= set(services)
    assert DEPLOYABLES | SERVICES <= _targets()
    built = re.search(r"^TARGETS=\((.*)\)$", BUILD.read_text(), flags=re.MULTILINE)
    assert built is not None and DEPLOYABLES | SERVICES <= set(built.group(1).split())
    for name, service in services.items():
        assert _image_target(service) in _targets(), name


def test_every_service_has_a_health_check_a_restart_policy_and_host_networking() -> None:
    for name, service in _compose()["services"].items():
        assert service.get("network_mode") == "host", name
        if service.get("labels", {}).get("io.metalake.job") == "true":
            # A one-shot job: restarted until it succeeds, then done (no health to check).
            assert service["restart"] == "on-failure", name
            continue
        assert service.get("restart") in ("always", "unless-stopped"), name
        test = service.get("healthcheck", {}).get("test")
        assert isinstance(test, list) and test[0] == "CMD", name


def test_every_deployable_checks_its_readyz_and_runs_read_only() -> None:
    services = _compose()["services"]
    containerfile = CONTAINERFILE.read_text()
    for name in DEPLOYABLES:
        service = services[name]
        assert service["read_only"] is True, name
        assert service["healthcheck"]["test"][:2] == ["CMD", "python3"], name
        assert "/opt/metalake/healthcheck.py" in service["healthcheck"]["test"], name
        stage = containerfile.split(f" AS {name}\n", 1)[1].split("\nFROM ", 1)[0]
        assert "HEALTHCHECK" in stage, f"image {name} has no HEALTHCHECK"


def test_each_secret_file_variable_names_a_secret_its_service_mounts() -> None:
    doc = _compose()
    for name, service in doc["services"].items():
        mounted = set(service.get("secrets", []))
        assert mounted <= set(doc["secrets"]), name
        for variable, value in service.get("environment", {}).items():
            if variable.endswith("_FILE") and str(value).startswith("/run/secrets/"):
                assert str(value).removeprefix("/run/secrets/") in mounted, (name, variable)


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name in list(os.environ):
        if name.upper().startswith("METALAKE_"):
            monkeypatch.delenv(name)
    out = tmp_path / "state"
    generate(out, layout.BLOCK_29, "test")
    return out


def test_generate_renders_configuration_and_keeps_secrets_out_of_the_environment(state: Path) -> None:
    env = (state / "metalake.env").read_text()
    secrets = {name: (state / "secrets" / name).read_text() for name in layout.SECRET_SETTINGS}
    assert all(len(value) >= 16 for value in secrets.values())
    for value in secrets.values():
        assert value not in env and value not in (state / "host.env").read_text()
    assert "METALAKE_KAFKA__BOOTSTRAP_SERVERS=127.0.0.1:29092" in env
    config = (state / "trino" / "etc" / "config.properties").read_text()
    assert "http-server.https.port=29080" in config and "http-server.http.enabled=false" in config
    assert f"internal-communication.shared-secret={secrets['trino_shared_secret']}" in config
    users = json.loads(secrets["trino_passwords"])
    assert set(users) <= {line.split(":")[0] for line in (state / "trino/etc/password.db").read_text().splitlines()}
    assert "listeners=PLAINTEXT://127.0.0.1:29092" in (state / "kafka" / "server.properties").read_text()
    assert (state / "tls" / "ca.pem").is_file() and (state / "data" / "access" / "rules.json").is_file()
    assert oct((state / "secrets" / "postgres_password").stat().st_mode & 0o777) == "0o400"


def test_generate_again_keeps_secrets_and_the_cluster_id(state: Path) -> None:
    before = {p.name: p.read_text() for p in (state / "secrets").iterdir()}
    cluster = (state / ".env").read_text()
    generate(state, layout.BLOCK_29, "test")
    assert {p.name: p.read_text() for p in (state / "secrets").iterdir()} == before
    assert (state / ".env").read_text() == cluster


def test_the_host_env_reaches_the_secrets_through_files(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ops.settings import Settings

    for line in (state / "host.env").read_text().splitlines():
        key, _, value = line.partition("=")
        monkeypatch.setenv(key, value.strip("'"))
    settings = Settings(_env_file=None)
    key = settings.api.key_encryption_key
    assert key is not None
    assert key.get_secret_value() == (state / "secrets" / "api_key_encryption_key").read_text()
    assert settings.api.port == 29000 and settings.trino.port == 29080


def test_a_layer_installing_a_bind_mounted_wheel_is_keyed_on_its_digest() -> None:
    """A RUN's cache key leaves out what a bind mount holds: without the digest as a build argument, a rebuilt image
    kept the metalake wheel (or the requirements) of the first build."""
    stages = re.split(r"^FROM ", CONTAINERFILE.read_text(), flags=re.MULTILINE)
    for stage in stages:
        for arg, marker in (
            ("METALAKE_WHEEL_SHA", "metalake-0.1.0-py3-none-any.whl"),
            ("REQUIREMENTS_SHA", "core.txt"),
        ):
            if marker in stage:
                assert stage.index(f"ARG {arg}") < stage.index(marker), stage.splitlines()[0]
    build = BUILD.read_text()
    assert '--build-arg REQUIREMENTS_SHA="$requirements_sha" --build-arg METALAKE_WHEEL_SHA="$wheel_sha"' in build


def test_every_process_that_names_tenants_schemas_reads_the_key_they_derive_from() -> None:
    """Schema names are keyed (tenants.trino_schemas): a process without the key rendered Trino's rules for unkeyed
    schemas, and the demo's SQL step was refused (PERMISSION_DENIED) on the API's keyed schema."""
    services = _compose()["services"]
    for name in ("api", "stream", "lake-worker", "access"):
        assert "api_key_encryption_key" in services[name]["secrets"], name
        assert services[name]["environment"]["METALAKE_API__KEY_ENCRYPTION_KEY_FILE"].endswith("api_key_encryption_key")
