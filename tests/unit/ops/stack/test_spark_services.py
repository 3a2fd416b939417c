"""The local Spark standalone cluster's services: configuration written from the stack's generated secret (owner-only
file, never on the command line), command lines bound to the stack's host and ports."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from ops.settings import Settings
from ops.stack.paths import with_stack_paths
from ops.stack.services.base import ServiceError, StackContext
from ops.stack.services.spark import SECRET_VARIABLE, SparkMaster, SparkWorker, master_url
from ops.stack.settings import StackSettings


@pytest.fixture
def ctx(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> StackContext:
    monkeypatch.delenv(SECRET_VARIABLE, raising=False)
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack")))
    return StackContext(settings, tmp_path)


def test_the_secret_comes_from_stack_env_into_an_owner_only_file(ctx: StackContext) -> None:
    ctx.stack_dir.mkdir(parents=True)
    (ctx.stack_dir / "stack.env").write_text(f"OTHER=x\n{SECRET_VARIABLE}=gen-secret-123\n")
    for service in (SparkMaster(), SparkWorker()):
        service.prepare(ctx)
        props = service.properties(ctx)
        assert stat.S_IMODE(props.stat().st_mode) == 0o600
        lines = props.read_text().splitlines()
        assert "spark.authenticate.secret gen-secret-123" in lines
        assert {"spark.authenticate true", "spark.network.crypto.enabled true", "spark.ui.killEnabled false"} <= set(
            lines
        )
        assert not any("gen-secret-123" in arg for arg in service.argv(ctx))


def test_no_secret_is_a_clear_error(ctx: StackContext) -> None:
    with pytest.raises(ServiceError, match=SECRET_VARIABLE):
        SparkMaster().prepare(ctx)


def test_command_lines_bind_the_stack_host_and_ports(ctx: StackContext) -> None:
    ports = ctx.settings.stack.ports
    master = SparkMaster().argv(ctx)
    assert master[1] == "org.apache.spark.deploy.master.Master"
    assert master[master.index("--host") + 1] == "127.0.0.1"
    assert master[master.index("--port") + 1] == str(ports.spark_master)
    worker = SparkWorker().argv(ctx)
    assert worker[-1] == master_url(ctx) == f"spark://127.0.0.1:{ports.spark_master}"
    assert worker[worker.index("--cores") + 1] == "2"
    assert SparkWorker().requires == ("spark-master",)
    assert SparkMaster().env(ctx)["SPARK_LOCAL_IP"] == "127.0.0.1"
