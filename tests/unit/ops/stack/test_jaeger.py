"""The stack's Jaeger: started by default once built (with tracing on), on loopback only, and stack.env pointing
every process's spans at its OTLP receiver."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from metalake.telemetry.setup import signal_url
from ops.settings import Settings
from ops.stack.manager import StackManager
from ops.stack.paths import with_stack_paths
from ops.stack.services.base import StackContext
from ops.stack.services.jaeger import Jaeger, config
from ops.stack.settings import StackSettings


def _manager(tmp_path: Path, tracing: bool = True) -> StackManager:
    settings = with_stack_paths(Settings(stack=StackSettings(dir=tmp_path / ".stack", tracing=tracing)))
    return StackManager(settings, tmp_path, echo=lambda _: None)


def _build(manager: StackManager) -> None:
    cache = manager.context.cache_dir("jaeger")
    (cache / "bin").mkdir(parents=True)
    (cache / "bin" / "jaeger").write_text("")
    (cache / ".ready").write_text("v1.76.0-go1.26.8\n")


def _default(manager: StackManager) -> list[str]:
    return [s.name for s in manager._select(None, with_job=True)]


def test_started_by_default_once_built_and_only_with_tracing(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    assert "jaeger" not in _default(manager)  # not built yet: `up` does not wait for a first build
    _build(manager)
    assert _default(manager).index("jaeger") < _default(manager).index("stream")
    off = _manager(tmp_path, tracing=False)
    assert "jaeger" not in _default(off)
    assert [s.name for s in off._select(["jaeger"], with_job=False)] == ["jaeger"]


def _stack_env(manager: StackManager) -> dict[str, str]:
    manager._write_env_file()
    text = (manager.context.stack_dir / "stack.env").read_text()
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_stack_env_sends_every_process_spans_to_the_receiver(tmp_path: Path) -> None:
    env = _stack_env(_manager(tmp_path))
    assert env["METALAKE_TELEMETRY__TRACES_EXPORTER"] == "otlp"
    assert env["METALAKE_TELEMETRY__OTLP_ENDPOINT"] == "http://127.0.0.1:4318"
    assert "METALAKE_TELEMETRY__TRACES_EXPORTER" not in _stack_env(_manager(tmp_path / "off", tracing=False))


def test_every_port_of_the_configuration_is_on_the_stack_host(tmp_path: Path) -> None:
    manager = _manager(tmp_path)
    ctx: StackContext = manager.context
    Jaeger().prepare(ctx)
    written = json.loads(Jaeger().config_file(ctx).read_text())
    assert written == config(ctx)
    endpoints = [
        written["receivers"]["otlp"]["protocols"]["http"]["endpoint"],
        written["extensions"]["jaeger_query"]["http"]["endpoint"],
        written["extensions"]["jaeger_query"]["grpc"]["endpoint"],
    ]
    assert endpoints == ["127.0.0.1:4318", "127.0.0.1:16686", "127.0.0.1:16685"]
    assert list(written["receivers"]["otlp"]["protocols"]) == ["http"]  # no gRPC receiver
    assert written["service"]["telemetry"]["metrics"] == {"level": "none"}  # no :8888
    assert sorted(Jaeger().ports(ctx)) == [4318, 16685, 16686]


@pytest.mark.parametrize(
    ("endpoint", "url"),
    [
        (None, None),
        ("http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
        ("http://collector:4318/", "http://collector:4318/v1/traces"),
        ("https://tempo.example/v1/traces", "https://tempo.example/v1/traces"),
    ],
)
def test_the_traces_url_under_the_otlp_endpoint(endpoint: str | None, url: str | None) -> None:
    assert signal_url(endpoint, "traces") == url
