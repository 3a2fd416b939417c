"""The optional SeaweedFS of a Compose deployment, offline: ``generate --s3`` (the lake root on s3a://, its key pair
as secret files, Trino's catalog on S3), compose.s3.yaml merged into compose.yaml as Compose merges it, the images
it needs. Running it is ``METALAKE_COMPOSE_S3=1 make compose-up`` (docs/deploy.md)."""

from __future__ import annotations

import copy
import json
import os
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from ops.compose import layout
from ops.compose.__main__ import generate, main

REPO = Path(__file__).resolve().parents[3]
COMPOSE = REPO / "deploy" / "compose"
IMAGES = REPO / "deploy" / "images"
# The processes that read or write the lake (and the one-shot job, which creates its bucket).
LAKE_USERS = {"init", "api", "connect", "stream", "lake-worker"}
KEYS = ("s3_access_key_id", "s3_secret_access_key")


def _merge(base: Any, extra: Any) -> Any:
    """Compose's merge of an override file (podman-compose's rec_merge): maps merge, lists extend, scalars replace."""
    if isinstance(base, dict) and isinstance(extra, dict):
        out = dict(base)
        for key, value in extra.items():
            out[key] = _merge(base[key], value) if key in base else copy.deepcopy(value)
        return out
    if isinstance(base, list) and isinstance(extra, list):
        return [*base, *extra]
    return copy.deepcopy(extra)


def _merged() -> dict[str, Any]:
    base = yaml.safe_load((COMPOSE / "compose.yaml").read_text())
    merged: dict[str, Any] = _merge(base, yaml.safe_load((COMPOSE / "compose.s3.yaml").read_text()))
    return merged


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.upper().startswith("METALAKE_"):
            monkeypatch.delenv(name)


@pytest.fixture
def state(tmp_path: Path, clean_env: None) -> Path:
    out = tmp_path / "state"
    assert main(["generate", str(out), "--ports", "block27", "--tag", "test", "--s3"]) == 0
    return out


def _env(path: Path) -> dict[str, str]:
    pairs = (line.partition("=") for line in path.read_text().splitlines())
    return {k: v.strip("'") for k, _, v in pairs}


def test_generate_s3_puts_the_lake_in_seaweedfs_and_its_keys_in_files_only(state: Path) -> None:
    env = _env(state / "metalake.env")
    assert env["METALAKE_LAKE__ROOT"] == layout.S3_LAKE_ROOT
    assert env["METALAKE_LAKE__S3__ENDPOINT"] == "http://127.0.0.1:27333"
    assert _env(state / ".env")["METALAKE_S3"] == "true"
    keys = {name: (state / "secrets" / name).read_text() for name in KEYS}
    assert all(len(value) >= 32 for value in keys.values())
    identities = json.loads((state / "secrets" / layout.SEAWEEDFS_IDENTITIES).read_text())
    assert identities["identities"][0]["credentials"] == [
        {"accessKey": keys["s3_access_key_id"], "secretKey": keys["s3_secret_access_key"]}
    ]
    catalog = (state / "trino" / "etc" / "catalog" / "lake.properties").read_text()
    assert "hive.metastore.catalog.dir=s3://metalake-lake/lake/_trino_metastore" in catalog
    assert "s3.endpoint=http://127.0.0.1:27333" in catalog and "local.location" not in catalog
    assert "s3.aws-access-key=${ENV:METALAKE_TRINO_S3_ACCESS_KEY}" in catalog
    for path in [p for p in state.rglob("*") if p.is_file() and "secrets" not in p.parts]:
        text = path.read_text(errors="replace")
        assert not any(value in text for value in keys.values()), path
    assert oct((state / "secrets" / layout.SEAWEEDFS_IDENTITIES).stat().st_mode & 0o777) == "0o400"
    assert (state / "data" / "seaweedfs").is_dir()
    assert not any((state / "data" / "lake").iterdir())


def test_generate_again_without_the_switch_moves_the_lake_back_and_keeps_the_keys(state: Path) -> None:
    keys = {name: (state / "secrets" / name).read_text() for name in KEYS}
    generate(state, layout.BLOCK_27, "test", s3=True)
    assert {name: (state / "secrets" / name).read_text() for name in KEYS} == keys
    generate(state, layout.BLOCK_27, "test")
    assert _env(state / ".env")["METALAKE_S3"] == "false"
    assert _env(state / "metalake.env")["METALAKE_LAKE__ROOT"] == layout.LAKE
    assert "METALAKE_LAKE__S3__ENDPOINT" not in _env(state / "metalake.env")
    catalog = (state / "trino" / "etc" / "catalog" / "lake.properties").read_text()
    assert "fs.native-s3.enabled" not in catalog and f"local.location={layout.LAKE}" in catalog


def test_a_deployment_without_the_switch_has_no_s3_secrets(tmp_path: Path, clean_env: None) -> None:
    generate(tmp_path, layout.BLOCK_29, "test")
    assert not any((tmp_path / "secrets" / name).exists() for name in (*KEYS, layout.SEAWEEDFS_IDENTITIES))
    assert not (tmp_path / "data" / "seaweedfs").exists()


def test_the_host_tool_reads_the_s3_keys_through_files(state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from ops.settings import Settings

    for key, value in _env(state / "host.env").items():
        monkeypatch.setenv(key, value)
    settings = Settings(_env_file=None)
    assert settings.lake_on_s3
    s3 = settings.lake.s3
    assert s3.access_key_id is not None and s3.secret_access_key is not None
    assert s3.secret_access_key.get_secret_value() == (state / "secrets" / "s3_secret_access_key").read_text()


def test_seaweedfs_is_a_service_like_the_others_and_only_the_lake_users_get_the_keys() -> None:
    doc = _merged()
    services = doc["services"]
    seaweedfs = services["seaweedfs"]
    assert seaweedfs["image"] == "localhost/metalake/seaweedfs:${METALAKE_TAG}"
    assert seaweedfs["network_mode"] == "host" and seaweedfs["read_only"] is True
    assert seaweedfs["restart"] == "unless-stopped" and seaweedfs["healthcheck"]["test"][0] == "CMD"
    assert "-s3.config=/run/secrets/seaweedfs_s3_config" in seaweedfs["command"]
    assert any(v.endswith(":/var/lib/seaweedfs") for v in seaweedfs["volumes"])
    for name, service in services.items():
        mounted = set(service.get("secrets", []))
        assert mounted <= set(doc["secrets"]), name
        for variable, value in service.get("environment", {}).items():
            if variable.endswith("_FILE") and str(value).startswith("/run/secrets/"):
                assert str(value).removeprefix("/run/secrets/") in mounted, (name, variable)
        holds_keys = set(KEYS) <= mounted
        assert holds_keys == (name in LAKE_USERS | {"trino"}), name
        if name in LAKE_USERS | {"trino"}:
            assert "seaweedfs" in service["depends_on"], name
    # Trino's entrypoint turns exactly these files into the variables its catalog names.
    entrypoint = (IMAGES / "files" / "trino-entrypoint.sh").read_text()
    assert all(f":{name}" in entrypoint for name in KEYS)


def test_every_port_compose_s3_names_is_rendered(state: Path) -> None:
    env = _env(state / ".env")
    named = set(re.findall(r"\$\{(PORT_[A-Z_]+)\}", (COMPOSE / "compose.s3.yaml").read_text()))
    assert named and named <= set(env)
    assert all(27000 <= int(env[name]) <= 27999 for name in named)


@pytest.mark.parametrize(("ports", "thousand"), [(layout.BLOCK_29, 29), (layout.BLOCK_27, 27)])
def test_a_port_block_holds_every_port_once(ports: layout.Ports, thousand: int) -> None:
    values = list(vars(ports).values())
    assert len(set(values)) == len(values)
    assert all(v // 1000 == thousand for v in values)
    # The local stack's FerretDB (and MongoDB's default) port stays free.
    assert 27017 not in values


def test_the_stream_image_holds_the_s3a_jars_and_seaweedfs_has_an_image() -> None:
    containerfile = (IMAGES / "Containerfile").read_text()
    spark = containerfile.split(" AS spark\n", 1)[1].split("\nFROM ", 1)[0]
    assert "COPY artifacts/spark-s3-jars /opt/metalake/spark-s3-jars" in spark
    assert "METALAKE_LAKE__S3__SPARK_JARS_DIR=/opt/metalake/spark-s3-jars" in spark
    seaweedfs = containerfile.split(" AS seaweedfs\n", 1)[1]
    assert "HEALTHCHECK" in seaweedfs and "USER 10001:10001" in seaweedfs
    build = (IMAGES / "build.sh").read_text()
    assert 'link "$STACK_CACHE/spark-s3/jars" "$a/spark-s3-jars"' in build
    assert "TARGETS+=(seaweedfs)" in build
