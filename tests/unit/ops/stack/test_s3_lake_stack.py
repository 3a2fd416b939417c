"""The local stack with a lake on S3: SeaweedFS starts only for it (or by name), bound to loopback, one generated
identity; Trino's catalog and Spark's session point at the store without writing a key into a file or a log."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from pydantic import SecretStr

from metalake.lake_settings import LakeS3Settings
from metalake.lake_uri import S3Path
from ops.settings import Settings
from ops.stack.lake_storage import ACCESS_KEY_VAR, SECRET_KEY_VAR, trino_file_system, trino_file_system_env
from ops.stack.manager import GENERATED_SECRETS, StackManager
from ops.stack.paths import stack_paths, with_stack_paths
from ops.stack.services.base import StackContext
from ops.stack.services.seaweedfs import SeaweedFS
from ops.stack.services.trino import Trino, service_users
from ops.stack.settings import StackSettings
from processors.enrichment.session import SparkSetupError, _s3a_jars, s3a_conf, secret_properties


def _settings(tmp_path: Path, lake: str | None = None, **s3: object) -> Settings:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack")))
    if lake is not None:
        settings.lake.root = S3Path.parse(lake)
    settings.lake.s3 = LakeS3Settings(**s3)  # type: ignore[arg-type]
    # Trino's configuration also writes its service users' password file.
    settings.trino.passwords = {user: SecretStr(f"pw-{user}") for user in service_users(settings)}
    settings.trino.shared_secret = SecretStr("internal-secret")
    return settings


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if line)


def test_seaweedfs_starts_by_default_only_for_a_lake_on_s3(tmp_path: Path) -> None:
    local = StackManager(_settings(tmp_path), tmp_path, echo=lambda _: None)
    assert "seaweedfs" not in [s.name for s in local._select(None, with_job=True, with_processors=True)]
    assert [s.name for s in local._select(["seaweedfs"], with_job=False)] == ["seaweedfs"]
    on_s3 = StackManager(_settings(tmp_path, "s3a://metalake/lake"), tmp_path, echo=lambda _: None)
    names = [s.name for s in on_s3._select(None, with_job=False)]
    assert names == ["kafka", "postgres", "ferretdb", "seaweedfs", "api", "trino", "prometheus"]
    # Trino started alone brings the store its metastore is in.
    assert [s.name for s in on_s3._select(["trino"], with_job=False)] == ["seaweedfs", "api", "trino"]


def test_seaweedfs_binds_every_port_to_loopback_and_keeps_its_data_in_the_stack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("METALAKE_LAKE__S3__ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("METALAKE_LAKE__S3__SECRET_ACCESS_KEY", raising=False)
    settings = _settings(tmp_path, "s3a://metalake/lake")
    (tmp_path / ".stack").mkdir()
    (tmp_path / ".stack" / "stack.env").write_text(
        "METALAKE_LAKE__S3__ACCESS_KEY_ID=ak-generated\nMETALAKE_LAKE__S3__SECRET_ACCESS_KEY=sk-generated\n"
    )
    ctx = StackContext(settings, tmp_path)
    service = SeaweedFS()
    service.prepare(ctx)
    argv = service.argv(ctx)
    assert "-ip.bind=127.0.0.1" in argv and "-ip=127.0.0.1" in argv
    assert f"-dir={tmp_path / '.stack' / 'data' / 'seaweedfs'}" in argv
    assert "-master.telemetry=false" in argv
    assert not any("sk-generated" in a for a in argv)  # the key is in the owner-only config file, not argv
    config = ctx.run_dir("seaweedfs") / "s3.json"
    assert config.stat().st_mode & 0o777 == 0o600
    (identity,) = json.loads(config.read_text())["identities"]
    assert identity["credentials"] == [{"accessKey": "ak-generated", "secretKey": "sk-generated"}]
    # Every HTTP port and its gRPC port is checked free before start (and none is Trino's 8080).
    assert service.ports(ctx) == [8333, 9333, 8381, 8888, 18333, 19333, 18381, 18888]


def test_the_stack_generates_the_s3_keys_once() -> None:
    assert {"METALAKE_LAKE__S3__ACCESS_KEY_ID", "METALAKE_LAKE__S3__SECRET_ACCESS_KEY"} <= set(GENERATED_SECRETS)


def test_the_stack_points_processes_at_the_s3_jars() -> None:
    paths = stack_paths(Path("/x/.stack"))
    assert paths["METALAKE_LAKE__S3__SPARK_JARS_DIR"] == "/x/.stack/cache/spark-s3/jars"


def test_trino_reads_a_local_lake_as_before_without_an_s3_store(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    assert trino_file_system(settings, settings.lake.s3) == [
        "hive.metastore.catalog.dir=local:///_trino_metastore",
        "fs.native-local.enabled=true",
        f"local.location={settings.lake_root}",
    ]
    assert trino_file_system_env(settings, settings.lake.s3) == {}


def test_trino_catalog_on_s3_names_the_keys_by_variable_only(tmp_path: Path) -> None:
    settings = _settings(
        tmp_path,
        "s3a://metalake/lake",
        endpoint="http://127.0.0.1:8333",
        access_key_id=SecretStr("ak-1"),
        secret_access_key=SecretStr("sk-1"),
    )
    ctx = StackContext(settings, tmp_path)
    Trino().prepare(ctx)
    catalog = _properties(ctx.run_dir("trino") / "etc" / "catalog" / "lake.properties")
    assert catalog["hive.metastore.catalog.dir"] == "s3://metalake/lake/_trino_metastore"
    assert catalog["fs.native-s3.enabled"] == "true"
    assert catalog["s3.endpoint"] == "http://127.0.0.1:8333"
    assert catalog["s3.path-style-access"] == "true"
    assert catalog["s3.aws-secret-key"] == "${ENV:METALAKE_TRINO_S3_SECRET_KEY}"
    assert "fs.native-local.enabled" not in catalog
    assert "sk-1" not in (ctx.run_dir("trino") / "etc" / "catalog" / "lake.properties").read_text()
    env = Trino().env(ctx)
    assert (env[ACCESS_KEY_VAR], env[SECRET_KEY_VAR]) == ("ak-1", "sk-1")


def test_the_stack_trino_reads_its_seaweedfs_with_the_generated_keys_even_on_a_first_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The tooling read its settings before `up` wrote stack.env; Trino's catalog must still get the keys written.
    monkeypatch.delenv("METALAKE_LAKE__S3__ACCESS_KEY_ID", raising=False)
    monkeypatch.delenv("METALAKE_LAKE__S3__SECRET_ACCESS_KEY", raising=False)
    settings = _settings(tmp_path)
    (tmp_path / ".stack").mkdir()
    (tmp_path / ".stack" / "stack.env").write_text(
        "METALAKE_LAKE__S3__ACCESS_KEY_ID=ak-generated\nMETALAKE_LAKE__S3__SECRET_ACCESS_KEY=sk-generated\n"
    )
    ctx = StackContext(settings, tmp_path)
    Trino().prepare(ctx)
    catalog = _properties(ctx.run_dir("trino") / "etc" / "catalog" / "lake.properties")
    assert catalog["fs.native-local.enabled"] == "true"
    assert catalog["fs.native-s3.enabled"] == "true"
    assert catalog["s3.endpoint"] == "http://127.0.0.1:8333"
    assert catalog["s3.aws-access-key"] == "${ENV:METALAKE_TRINO_S3_ACCESS_KEY}"
    assert Trino().env(ctx)[SECRET_KEY_VAR] == "sk-generated"


def test_a_local_lake_catalog_also_reads_the_configured_s3_store(tmp_path: Path) -> None:
    settings = _settings(tmp_path, endpoint="http://127.0.0.1:8333")
    lines = trino_file_system(settings, settings.lake.s3)
    assert "fs.native-local.enabled=true" in lines and "fs.native-s3.enabled=true" in lines
    assert lines[0] == "hive.metastore.catalog.dir=local:///_trino_metastore"


def test_spark_gets_s3a_settings_and_jars_only_for_a_lake_on_s3(tmp_path: Path) -> None:
    s3 = LakeS3Settings(
        endpoint="http://127.0.0.1:8333", access_key_id=SecretStr("ak"), secret_access_key=SecretStr("sk")
    )
    conf = s3a_conf(s3)
    assert conf["spark.hadoop.fs.s3a.endpoint"] == "http://127.0.0.1:8333"
    assert conf["spark.hadoop.fs.s3a.connection.ssl.enabled"] == "false"
    assert conf["spark.hadoop.fs.s3a.path.style.access"] == "true"
    assert not any(v in ("ak", "sk") for v in conf.values())  # the keys never reach spark-submit's command line
    assert conf["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith("SimpleAWSCredentialsProvider")
    assert s3a_conf(LakeS3Settings())["spark.hadoop.fs.s3a.aws.credentials.provider"].endswith(
        "DefaultCredentialsProvider"
    )
    assert _s3a_jars(_settings(tmp_path)) == []  # a local lake: no 690 MB bundle on the classpath
    on_s3 = _settings(tmp_path, "s3a://metalake/lake", spark_jars_dir=tmp_path / "none")
    with pytest.raises(SparkSetupError, match=r"spark-s3\.sh"):
        _s3a_jars(on_s3)
    (tmp_path / "jars").mkdir()
    (tmp_path / "jars" / "hadoop-aws-3.5.0.jar").touch()
    (tmp_path / "jars" / "bundle-2.35.4.jar").touch()
    on_s3.lake.s3.spark_jars_dir = tmp_path / "jars"
    assert [Path(j).name for j in _s3a_jars(on_s3)] == ["bundle-2.35.4.jar", "hadoop-aws-3.5.0.jar"]


def test_the_s3_keys_go_to_the_private_properties_file_with_a_local_master(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of the environment for this test: the function under test writes to os.environ.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.delenv("METALAKE_SPARK_PROPERTIES_FILE", raising=False)
    settings = _settings(
        tmp_path, "s3a://metalake/lake", access_key_id=SecretStr("ak-2"), secret_access_key=SecretStr("sk\\2")
    )
    secret_properties(settings, tmp_path)
    props = tmp_path / "secret.properties"
    assert props.read_text() == "spark.hadoop.fs.s3a.access.key ak-2\nspark.hadoop.fs.s3a.secret.key sk\\\\2\n"
    assert stat.S_IMODE(props.stat().st_mode) == 0o600
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == f"--properties-file {props} pyspark-shell"
    secret_properties(settings, tmp_path)  # a second session of the process: the same file, named once
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == f"--properties-file {props} pyspark-shell"
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS")
    secret_properties(_settings(tmp_path / "local"), tmp_path / "local")  # a local lake on a local master: no file
    assert "PYSPARK_SUBMIT_ARGS" not in os.environ
