"""What the Spark session asks of a cluster (processors.enrichment.session.cluster_conf), the code it ships
(shipping.code_archive) and how the cluster's secret reaches the JVM (never on a command line)."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
from pydantic import ValidationError

from ops.settings import Settings
from processors.enrichment import session
from processors.enrichment.settings import SparkSettings
from processors.enrichment.shipping import code_archive


def settings_with(**spark: object) -> Settings:
    return Settings(spark=SparkSettings.model_validate(spark))


def test_a_local_master_ships_no_code_and_runs_this_python(tmp_path: Path) -> None:
    conf = session.cluster_conf(settings_with(master="local[2]"), tmp_path)
    assert conf == {"spark.pyspark.python": sys.executable}


def test_a_cluster_gets_sizes_ports_the_code_zip_and_the_users_conf_last(tmp_path: Path) -> None:
    conf = session.cluster_conf(
        settings_with(
            master="spark://10.0.0.5:7077",
            executor_memory="3g",
            executor_cores=2,
            cores_max=4,
            driver_port=7078,
            block_manager_port=7079,
            executor_python="/opt/venv/bin/python",
            auth_secret="s3cret-value",
            conf={"spark.eventLog.enabled": "true", "spark.executor.cores": "1"},
        ),
        tmp_path,
    )
    assert conf["spark.executor.memory"] == "3g"
    assert conf["spark.executor.cores"] == "1"  # the user's own conf wins
    assert conf["spark.cores.max"] == "4"
    assert conf["spark.driver.port"] == "7078" and conf["spark.blockManager.port"] == "7079"
    assert conf["spark.pyspark.python"] == "/opt/venv/bin/python"
    assert conf["spark.authenticate"] == "true"
    assert conf["spark.network.crypto.enabled"] == "true"
    assert conf["spark.eventLog.enabled"] == "true"
    assert Path(conf["spark.submit.pyFiles"]).parent == tmp_path / "code"
    assert "s3cret-value" not in repr(conf)


def test_shipping_can_be_forced_either_way(tmp_path: Path) -> None:
    assert "spark.submit.pyFiles" in session.cluster_conf(settings_with(master="local[1]", ship_code=True), tmp_path)
    off = session.cluster_conf(settings_with(master="spark://h:7077", ship_code=False), tmp_path)
    assert "spark.submit.pyFiles" not in off


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"executor.memory": "1g"}, "must start with 'spark.'"),
        ({"spark.authenticate.secret": "x"}, "spark.auth_secret"),
    ],
)
def test_spark_conf_keys_are_checked(conf: dict[str, str], message: str) -> None:
    with pytest.raises(ValidationError, match=message):
        SparkSettings(conf=conf)


def test_the_code_zip_is_stable_and_importable_on_its_own(tmp_path: Path) -> None:
    first = code_archive(tmp_path)
    assert code_archive(tmp_path) == first
    names = zipfile.ZipFile(first).namelist()
    assert "processors/enrichment/rows.py" in names
    assert "metalake/events/schemas/io.metalake.asset.upserted.v1.json" in names
    assert not any("__pycache__" in n for n in names)
    assert not any(n.startswith(("api/", "connectors/", "ops/")) for n in names)
    # A fresh interpreter with the zip first on its path imports the row functions and the schemas from it, as an
    # executor does with spark.submit.pyFiles.
    probe = (
        "import processors.enrichment.rows as r, metalake.events.registry as g; "
        "assert g._load_schema('io.metalake.asset.upserted.v1'); print(r.__file__)"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "PYTHONPATH": str(first)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert out.strip().startswith(str(first))


def test_the_secret_goes_to_a_private_properties_file_not_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A copy of the environment for this test: the function under test writes to os.environ.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    monkeypatch.delenv(session.PROPERTIES_FILE_VARIABLE, raising=False)
    session.secret_properties(settings_with(master="spark://h:7077", auth_secret="s3cret-value"), tmp_path)
    props = tmp_path / "secret.properties"
    assert props.read_text() == "spark.authenticate.secret s3cret-value\n"
    assert stat.S_IMODE(props.stat().st_mode) == 0o600
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == f"--properties-file {props} pyspark-shell"
    assert "s3cret-value" not in os.environ["PYSPARK_SUBMIT_ARGS"]


def test_a_second_properties_file_is_refused_with_what_to_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "environ", os.environ.copy())
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--properties-file /etc/spark.conf pyspark-shell")
    monkeypatch.delenv(session.PROPERTIES_FILE_VARIABLE, raising=False)
    with pytest.raises(session.SparkSetupError, match="METALAKE_SPARK__AUTH_SECRET"):
        session.secret_properties(settings_with(master="spark://h:7077", auth_secret="x"), tmp_path)


def test_a_parents_properties_file_is_replaced_not_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # A test session or a worker built a session (its file named in the environment), then started a job: the child
    # inherits PYSPARK_SUBMIT_ARGS naming the parent's file, which holds another session's secrets.
    monkeypatch.setattr(os, "environ", os.environ.copy())
    parent = tmp_path / "parent" / "secret.properties"
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", f"--properties-file {parent} pyspark-shell")
    monkeypatch.setenv(session.PROPERTIES_FILE_VARIABLE, str(parent))
    session.secret_properties(settings_with(master="spark://h:7077", auth_secret="child-secret"), tmp_path)
    ours = tmp_path / "secret.properties"
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == f"--properties-file {ours} pyspark-shell"
    assert os.environ[session.PROPERTIES_FILE_VARIABLE] == str(ours)
    # A child with nothing secret (a local master) drops the parent's file rather than run with its secrets.
    session.secret_properties(settings_with(master="local[1]", auth_secret="child-secret"), tmp_path)
    assert os.environ["PYSPARK_SUBMIT_ARGS"] == "pyspark-shell"
    assert session.PROPERTIES_FILE_VARIABLE not in os.environ


def test_the_operators_driver_java_options_come_after_metalakes_own(tmp_path: Path) -> None:
    kafka = ["-Dorg.apache.kafka.sasl.oauthbearer.allowed.urls=https://idp.example/token"]
    plain = session.driver_java_options(settings_with(), tmp_path, kafka)
    assert plain == f"-Dderby.system.home={tmp_path / 'derby'} {kafka[0]}"
    tuned = session.driver_java_options(
        settings_with(driver_java_options=" -XX:TieredStopAtLevel=1  -Xss4m "), tmp_path, []
    )
    assert tuned == f"-Dderby.system.home={tmp_path / 'derby'} -XX:TieredStopAtLevel=1 -Xss4m"
