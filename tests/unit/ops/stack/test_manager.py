"""StackManager failure paths that need no real service: busy ports, failed fetches, unknown services."""

from __future__ import annotations

import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.settings import Settings
from ops.stack.manager import StackError, StackManager, with_dependents, with_requirements
from ops.stack.paths import with_stack_paths
from ops.stack.process import alive, spawn
from ops.stack.services.base import ServiceError, StackContext
from ops.stack.settings import StackPorts, StackSettings


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        yield sock.getsockname()[1]


def _settings(tmp_path: Path, **ports: int) -> Settings:
    return with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack", ports=StackPorts(**ports))))


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_busy_port_is_refused_before_anything_is_fetched(tmp_path: Path, busy_port: int) -> None:
    lines: list[str] = []
    # FerretDB brings PostgreSQL along: its port is checked too, before PostgreSQL is fetched or started.
    manager = StackManager(_settings(tmp_path, ferretdb=busy_port, postgres=_free_port()), tmp_path, echo=lines.append)
    with pytest.raises(StackError) as err:
        manager.up(["ferretdb"])
    message = str(err.value)
    assert f"ferretdb: port 127.0.0.1:{busy_port} is in use by another process" in message
    assert "METALAKE_STACK__PORTS__FERRETDB" in message
    assert not (tmp_path / ".stack" / "cache").exists()  # refused before any download or build
    assert lines == []


def test_unknown_service_names_the_known_ones(tmp_path: Path) -> None:
    manager = StackManager(_settings(tmp_path), tmp_path, echo=lambda _: None)
    with pytest.raises(
        StackError, match=r"unknown service\(s\) zookeeper; known: kafka, postgres, ferretdb, seaweedfs, api, trino"
    ):
        manager.up(["zookeeper"])


def test_a_failed_fetch_names_the_service_and_its_log(tmp_path: Path) -> None:
    fetch = tmp_path / "deploy" / "local" / "fetch"
    fetch.mkdir(parents=True)
    (fetch / "broken.sh").write_text("echo 'resolving...'; echo 'no route to registry' >&2; exit 3\n")
    ctx = StackContext(_settings(tmp_path), tmp_path)
    with pytest.raises(ServiceError) as err:
        ctx.run_fetch_script("broken", "kafka")
    log = tmp_path / ".stack" / "logs" / "fetch-kafka.log"
    assert str(err.value) == f"kafka: fetch/build failed (exit 3); see {log}"
    assert "no route to registry" in log.read_text()


def test_a_hanging_fetch_times_out(tmp_path: Path) -> None:
    fetch = tmp_path / "deploy" / "local" / "fetch"
    fetch.mkdir(parents=True)
    (fetch / "slow.sh").write_text("sleep 30\n")
    ctx = StackContext(_settings(tmp_path), tmp_path)
    with pytest.raises(ServiceError, match=r"trino: fetch timed out after 1s; see .*fetch-trino.log"):
        ctx.run_fetch_script("slow", "trino", timeout_s=1)


def test_status_of_a_fresh_stack_is_all_stopped(tmp_path: Path) -> None:
    manager = StackManager(_settings(tmp_path), tmp_path, echo=lambda _: None)
    assert [(s.name, s.state, s.pid) for s in manager.status()] == [
        ("kafka", "stopped", None),
        ("postgres", "stopped", None),
        ("ferretdb", "stopped", None),
        ("seaweedfs", "stopped", None),
        ("api", "stopped", None),
        ("trino", "stopped", None),
        ("prometheus", "stopped", None),
        ("jaeger", "stopped", None),
        ("spark-master", "stopped", None),
        ("spark-worker", "stopped", None),
        ("stream", "stopped", None),
        ("lake-worker", "stopped", None),
        ("propagation", "stopped", None),
        ("outbound", "stopped", None),
        ("access", "stopped", None),
        ("connect", "stopped", None),
    ]


def test_down_of_a_fresh_stack_stops_nothing(tmp_path: Path) -> None:
    lines: list[str] = []
    StackManager(_settings(tmp_path), tmp_path, echo=lines.append).down()
    assert lines == []


def test_down_with_an_empty_selection_stops_nothing(tmp_path: Path) -> None:
    # A caller that computed "the services I started" and got none must not stop everything.
    settings = _settings(tmp_path)
    run = tmp_path / ".stack" / "run" / "kafka"
    record, proc = spawn(["/bin/sleep", "30"], log_file=tmp_path / "k.log", pid_file=run / "pid", cwd=tmp_path, env={})
    try:
        lines: list[str] = []
        StackManager(settings, tmp_path, echo=lines.append).down([])
        assert lines == []
        assert alive(record)
        StackManager(settings, tmp_path, echo=lines.append).down(["kafka"])
        assert lines == [f"kafka       stopped (pid {record.pid})"]
        assert proc.wait(timeout=5) is not None
    finally:
        proc.kill()


def test_a_service_starts_with_what_it_requires_and_stops_with_what_requires_it(tmp_path: Path) -> None:
    settings = _settings(tmp_path)
    manager = StackManager(settings, tmp_path, echo=lambda _: None)
    assert [s.name for s in manager._select(["ferretdb"], with_job=False)] == ["postgres", "ferretdb"]
    assert [s.name for s in manager._select(["postgres"], with_job=False)] == ["postgres"]
    records = {}
    for name in ("postgres", "ferretdb", "kafka"):
        run = tmp_path / ".stack" / "run" / name
        records[name] = spawn(
            ["/bin/sleep", "30"], log_file=tmp_path / f"{name}.log", pid_file=run / "pid", cwd=tmp_path, env={}
        )
    try:
        lines: list[str] = []
        StackManager(settings, tmp_path, echo=lines.append).down(["postgres"])
        # FerretDB first: it stores in PostgreSQL. Kafka, which needs neither, keeps running.
        assert [line.split()[0] for line in lines] == ["ferretdb", "postgres"]
        assert alive(records["kafka"][0])
    finally:
        for _record, proc in records.values():
            proc.kill()


def test_requirements_and_dependents_are_transitive() -> None:
    requires = {"c": ["b"], "b": ["a"], "a": [], "x": []}
    assert with_requirements(["c"], requires) == {"a", "b", "c"}
    assert with_requirements(["x"], requires) == {"x"}
    assert with_dependents(["a"], requires) == {"a", "b", "c"}
    assert with_dependents(["c"], requires) == {"c"}


def test_down_stops_the_dedicated_tenants_queries_the_local_launcher_started(tmp_path: Path) -> None:
    # Detached (their own session) so they outlive the lake worker: only the whole stack's down stops them.
    settings = _settings(tmp_path)
    job = subprocess.Popen(["/bin/sleep", "30"], start_new_session=True)
    run_dir = tmp_path / ".stack" / "run" / "tenant-jobs" / "acme"
    run_dir.mkdir(parents=True)
    ticks = Path(f"/proc/{job.pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    (run_dir / "stream.pid").write_text(f"{job.pid} {ticks}\n")
    try:
        lines: list[str] = []
        StackManager(settings, tmp_path, echo=lines.append).down(["kafka"])
        assert job.poll() is None and lines == []  # one service's down leaves them
        StackManager(settings, tmp_path, echo=lines.append).down()
        assert lines == ["stream of tenant acme stopped"]
        assert job.wait(timeout=5) is not None
        assert not run_dir.exists()
    finally:
        job.kill()
