"""The API and processor services of ``up --with-processors``: selection, generated secrets, start markers."""

from __future__ import annotations

import socket
import stat
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from control.auth.settings import ApiSettings
from metalake.settings import load_settings
from ops.settings import Settings
from ops.stack.manager import GENERATED_SECRETS, StackError, StackManager, _generated_secrets
from ops.stack.paths import with_stack_paths
from ops.stack.services import SERVICES
from ops.stack.services.base import StackContext
from ops.stack.services.connect import ConnectWorker
from ops.stack.services.processors import LOCAL_SSRF_ALLOW, Outbound, Propagation, local_env
from ops.stack.settings import StackSettings

NEW = ["api", "propagation", "outbound", "access", "connect"]
# Trino authenticates JWTs with the API's JWKS, which it reads when it starts: the API comes first, in every selection.
INFRA = ["kafka", "postgres", "ferretdb", "api", "trino", "prometheus"]


def _manager(tmp_path: Path) -> StackManager:
    return StackManager(
        with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"))), tmp_path, echo=lambda _: None
    )


def _names(manager: StackManager, **flags: bool) -> list[str]:
    return [s.name for s in manager._select(None, flags.get("with_job", False), flags.get("with_processors", False))]


def test_with_processors_implies_the_job_and_with_job_does_not_start_processors(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    assert _names(manager) == INFRA
    # The integration tests' fixture asks for the job only: their processors run under their own groups. The lake
    # worker comes with the job (the erasures the API queues run where Spark work runs).
    assert _names(manager, with_job=True) == [*INFRA, "stream", "lake-worker"]
    assert _names(manager, with_processors=True) == [*INFRA, "stream", "lake-worker", *NEW[1:]]
    # By name, a processor starts alone (the others are already running).
    assert [s.name for s in manager._select(["outbound"], False)] == ["outbound"]
    # The Spark cluster only by name, the worker with its master.
    assert [s.name for s in manager._select(["spark-worker"], False)] == ["spark-master", "spark-worker"]


def test_down_and_status_cover_the_new_services(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    names = [r.name for r in manager.status()]
    assert names[-4:] == NEW[1:] and names.index("api") < names.index("trino")
    assert [r.state for r in manager.status()] == ["stopped"] * len(SERVICES)
    assert manager.log_path("access") == tmp_path / ".stack" / "logs" / "access.log"


def test_the_generated_key_is_kept_across_ups_owner_only_and_never_echoed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for key in GENERATED_SECRETS:
        monkeypatch.delenv(key, raising=False)
    lines: list[str] = []
    manager = StackManager(
        with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"))), tmp_path, echo=lines.append
    )
    manager._write_env_file()
    env_file = tmp_path / ".stack" / "stack.env"
    first = env_file.read_text()
    key_line = next(line for line in first.splitlines() if line.startswith("METALAKE_API__KEY_ENCRYPTION_KEY="))
    assert len(key_line.partition("=")[2]) >= 32
    assert stat.S_IMODE(env_file.stat().st_mode) == 0o600
    manager._write_env_file()
    assert env_file.read_text() == first  # the same key: tokens and sealed signing keys stay valid
    assert not any(key_line.partition("=")[2] in line for line in lines)
    # The settings read it from the file (what the API process does).
    monkeypatch.setenv("METALAKE_ENV_FILE", str(env_file))
    secret = load_settings(Settings).api.key_encryption_key
    assert secret is not None and secret.get_secret_value() == key_line.partition("=")[2]


def test_a_key_the_environment_sets_is_not_generated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_API__KEY_ENCRYPTION_KEY", "set-by-the-operator-0123456789")
    monkeypatch.setenv("METALAKE_TRINO__SHARED_SECRET", "set-by-the-operator-too-0123456789")
    monkeypatch.setenv("METALAKE_KAFKA__SASL_PASSWORD", "set-by-the-operator-too")
    monkeypatch.setenv("METALAKE_LAKE__S3__ACCESS_KEY_ID", "set-by-the-operator")
    monkeypatch.setenv("METALAKE_TELEMETRY__METRICS_TOKEN", "set-by-the-operator-as-well")
    monkeypatch.setenv("METALAKE_ACCESS__DECISIONS__KEY", "set-by-the-operator-for-trino")
    monkeypatch.delenv("METALAKE_SPARK__AUTH_SECRET", raising=False)
    monkeypatch.delenv("METALAKE_LAKE__S3__SECRET_ACCESS_KEY", raising=False)
    generated = [line.partition("=")[0] for line in _generated_secrets(tmp_path / "missing.env")]
    assert generated == ["METALAKE_SPARK__AUTH_SECRET", "METALAKE_LAKE__S3__SECRET_ACCESS_KEY"]
    monkeypatch.delenv("METALAKE_KAFKA__SASL_PASSWORD")
    lines = _generated_secrets(tmp_path / "missing.env")
    (line,) = [line for line in lines if line.startswith("METALAKE_KAFKA__SASL_PASSWORD=")]
    assert len(line.partition("=")[2]) >= 32


def test_the_ssrf_allowance_is_loopback_only_and_yields_to_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METALAKE_OUTBOUND__SSRF_ALLOW", raising=False)
    assert local_env()["METALAKE_OUTBOUND__SSRF_ALLOW"] == LOCAL_SSRF_ALLOW == '["127.0.0.1/32"]'
    monkeypatch.setenv("METALAKE_OUTBOUND__SSRF_ALLOW", "[]")
    assert local_env()["METALAKE_OUTBOUND__SSRF_ALLOW"] == "[]"


def test_a_processor_is_healthy_only_once_this_start_logged_its_marker(tmp_path: Path) -> None:
    ctx = StackContext(with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"))), tmp_path)
    service = Outbound()
    log = ctx.log_file("outbound")
    log.parent.mkdir(parents=True)
    log.write_text('{"message": "outbound.started"}\n{"message": "outbound.stopped"}\n')  # a previous run
    service.prepare(ctx)
    assert service.probe(ctx) == "outbound.started not logged yet"
    with log.open("a") as out:
        out.write('{"message": "outbound.started", "group": "metalake-outbound"}\n')
    assert service.probe(ctx) is None
    assert service.ready_file(ctx).exists()
    service.prepare(ctx)  # a restart forgets the previous start
    assert service.probe(ctx) == "outbound.started not logged yet"


def test_propagation_writes_its_own_ready_file(tmp_path: Path) -> None:
    ctx = StackContext(with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"))), tmp_path)
    argv = Propagation().argv(ctx)
    assert argv[argv.index("--ready-file") + 1] == str(ctx.run_dir("propagation") / "ready")
    assert argv[argv.index("-m") + 1 : argv.index("--ready-file")] == ["ops", "propagation", "run"]


def test_a_busy_api_port_names_the_api_setting(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(1)
        port = sock.getsockname()[1]
        settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"), api=ApiSettings(port=port)))
        with pytest.raises(StackError) as err:
            StackManager(settings, tmp_path, echo=lambda _: None).up(["api"])
    assert f"api: port 127.0.0.1:{port} is in use by another process" in str(err.value)
    assert "(e.g. METALAKE_API__PORT=<port>)" in str(err.value)


@pytest.mark.parametrize(
    "service", [s for s in SERVICES if s.name in ("stream", "lake-worker", *NEW)], ids=lambda s: s.name
)
def test_every_python_service_starts_a_command_that_exists(service: object, tmp_path: Path) -> None:
    # A renamed entry point must fail here, not when the stack starts it: run the service's own argv with --help.
    import itertools
    import subprocess
    import sys

    from ops.stack.services.base import Service

    assert isinstance(service, Service)
    ctx = StackContext(with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack"))), tmp_path)
    argv = service.argv(ctx)
    # The module and its subcommands, up to the first option (the options would start the service), then --help.
    words = list(itertools.takewhile(lambda a: not a.startswith("--"), argv[argv.index("-m") + 1 :]))
    done = subprocess.run(
        [sys.executable, "-m", *words, "--help"], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr[-1500:]


def test_the_connector_worker_serves_on_its_settings_port_with_the_local_allowances(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack")))
    settings.connect.port = 21601
    ctx = StackContext(settings, tmp_path)
    service = ConnectWorker()
    assert service.ports(ctx) == [21601] and service.port_variable() == "METALAKE_CONNECT__PORT"
    argv = service.argv(ctx)
    assert argv[1:4] == ["-m", "connectors", "run"] and argv[argv.index("--port") + 1] == "21601"
    # It needs Kafka and the control plane to start, not to be stopped with them.
    assert service.requires == () and service.needs_at_start(ctx) == ("kafka", "ferretdb")
    for key in ("METALAKE_CONNECT__SSRF_ALLOW", "METALAKE_CONNECT__ALLOW_PASSWORDLESS_SOURCES"):
        monkeypatch.delenv(key, raising=False)
    env = service.env(ctx)
    assert env["METALAKE_CONNECT__SSRF_ALLOW"] == LOCAL_SSRF_ALLOW
    assert env["METALAKE_CONNECT__ALLOW_PASSWORDLESS_SOURCES"] == "true"
    monkeypatch.setenv("METALAKE_CONNECT__SSRF_ALLOW", "[]")
    assert service.env(ctx)["METALAKE_CONNECT__SSRF_ALLOW"] == "[]"  # the environment's own value wins
    # Nothing listens there: the probe says so instead of raising.
    assert service.probe(ctx) == "/readyz unreachable (URLError)"


def test_the_connector_worker_is_healthy_when_its_readyz_says_ready(tmp_path: Path) -> None:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack")))
    answers = iter(
        [(503, b'{"status": "not-ready", "checks": {"kafka": "down: KafkaException"}}'), (200, b'{"status": "ready"}')]
    )

    class Ready(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status, body = next(answers)
            self.send_response(status)
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            """Quiet."""

    with ThreadingHTTPServer(("127.0.0.1", 0), Ready) as server:
        threading.Thread(target=server.serve_forever, daemon=True).start()
        settings.connect.port = server.server_address[1]
        ctx = StackContext(settings, tmp_path)
        try:
            assert ConnectWorker().probe(ctx) == "/readyz answered 503"
            assert ConnectWorker().probe(ctx) is None
        finally:
            server.shutdown()


def test_with_processors_starts_the_connector_worker_and_by_name_it_starts_alone(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    assert "connect" in _names(manager, with_processors=True)
    assert "connect" not in _names(manager, with_job=True)
    assert [s.name for s in manager._select(["connect"], False)] == ["kafka", "postgres", "ferretdb", "connect"]
