"""The local stack's Prometheus, started the way ``metalake stack up`` starts it (a stack folder of the test's own, on
free ports), scraping a real exporter in place of the admin API: it sends the bearer token the stack generated into
stack.env, from an owner-only file; a process that refuses the token shows as down with the 401. Every process's
target up on the real stack: tests/integration/test_demo.py (where the API and the processors run)."""

from __future__ import annotations

import glob
import hmac
import os
import socket
import stat
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from control.auth.settings import ApiSettings
from control.connectors.settings import ConnectSettings
from ops.settings import Settings
from ops.stack.health import port_free
from ops.stack.manager import StackManager
from ops.stack.paths import find_project_root, with_stack_paths
from ops.stack.scrape_targets import JOBS
from ops.stack.services.base import StackContext
from ops.stack.services.prometheus import TOKEN_VARIABLE, Prometheus, rules_glob
from ops.stack.settings import StackPorts, StackSettings
from tests._support.prometheus_api import fetched, query, rule_groups, target_health, wait_targets_up

ROOT = find_project_root(Path(__file__).resolve().parent)
EXPOSITION = b"# TYPE metalake_ready gauge\nmetalake_ready 1\n"


class Exporter:
    """A /metrics that answers only ``Bearer <token()>`` (401 otherwise), and counts the requests it refused."""

    def __init__(self, token: Callable[[], str | None]) -> None:
        self.refused = 0
        exporter = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                ok = hmac.compare_digest(self.headers.get("Authorization", ""), f"Bearer {token() or ''}")
                exporter.refused += not ok
                self.send_response(200 if ok else 401)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.end_headers()
                self.wfile.write(EXPOSITION if ok else b"")

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


@dataclass
class Started:
    manager: StackManager
    api: Exporter  # in place of the admin API: takes the stack's token
    connect: Exporter  # in place of the connector worker: wants another one


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _prometheus(stack_dir: Path) -> Iterator[Started]:
    """The stack's Prometheus alone, in ``stack_dir``, with the exporters in place of the API and the worker."""
    with pytest.MonkeyPatch.context() as env:
        env.delenv(TOKEN_VARIABLE, raising=False)
        env.delenv(f"{TOKEN_VARIABLE}_FILE", raising=False)
        # The package the checkout's stack fetched (or fetches now), not a download of its own.
        cache = fetched(ROOT, Path(os.environ.get("METALAKE_STACK__DIR") or ROOT / ".stack")).parent
        (stack_dir / "cache").mkdir(parents=True)
        (stack_dir / "cache" / "prometheus").symlink_to(cache)
        # The API's stand-in reads the token the stack generates into stack.env when it starts.
        api = Exporter(
            lambda: StackContext(Settings(stack=StackSettings(dir=stack_dir)), ROOT).generated_secret(TOKEN_VARIABLE)
        )
        connect = Exporter(lambda: "another-token")
        settings = Settings(
            stack=StackSettings(dir=stack_dir, ports=StackPorts(prometheus=_free_port())),
            api=ApiSettings(port=api.port),
            connect=ConnectSettings(port=connect.port),
        )
        manager = StackManager(with_stack_paths(settings), ROOT, echo=lambda _: None)
        try:
            manager.up(["prometheus"])
            yield Started(manager, api, connect)
        finally:
            manager.down(["prometheus"])
            api.server.shutdown()
            connect.server.shutdown()


@pytest.fixture(scope="module")
def started(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Started]:
    # One Prometheus for the tests that only read it: each start waits for its first scrapes.
    with _prometheus(tmp_path_factory.mktemp("prometheus") / ".stack") as running:
        yield running


def _scraped(url: str, job: str, timeout_s: float = 60) -> str:
    """A job's health once its target was scraped at least once."""
    deadline = time.monotonic() + timeout_s
    while (health := target_health(url)[job]) == "unknown" and time.monotonic() < deadline:
        time.sleep(1)
    return health


def test_prometheus_scrapes_with_the_generated_token_from_an_owner_only_file(started: Started) -> None:
    ctx, service = started.manager.context, Prometheus()
    url = service.url(ctx)
    wait_targets_up(url, ["prometheus", "api"], timeout_s=60)
    assert query(url, 'metalake_ready{job="api"}')[0]["value"][1] == "1"
    token = ctx.generated_secret(TOKEN_VARIABLE)
    assert token is not None and len(token) >= 32
    token_file = service.token_file(ctx)
    assert token_file.read_text() == token and stat.S_IMODE(token_file.stat().st_mode) == 0o600
    assert token not in service.config_file(ctx).read_text()
    assert started.api.refused == 0
    # The connector worker's stand-in wants another token: down, and Prometheus says why.
    connect = _scraped(url, "connect")
    assert connect.startswith("down") and "401" in connect, connect
    # The processes that do not run here are targets too: every job of the stack is scraped.
    assert set(target_health(url)) == {"prometheus", *JOBS}


def test_the_alert_rules_are_loaded_and_evaluated(started: Started) -> None:
    ctx = started.manager.context
    url = Prometheus().url(ctx)
    # Every group of every rules file the stack points Prometheus at, each with all its rules.
    shipped = [yaml.safe_load(Path(f).read_text()) for f in sorted(glob.glob(rules_glob(ctx.repo_dir)))]
    expected = {g["name"]: len(g["rules"]) for rules in shipped for g in rules["groups"]}
    assert "metalake-freshness" in expected
    assert rule_groups(url) == expected
    # The stream job does not run here: its target is down, and the down alert is pending (`for` 2 min).
    deadline = time.monotonic() + 60
    while not (pending := query(url, 'ALERTS{alertname="MetalakeProcessDown", alertstate="pending"}')):
        assert time.monotonic() < deadline, target_health(url)
        time.sleep(1)
    assert "stream" in {s["metric"]["job"] for s in pending}
    assert "api" not in {s["metric"]["job"] for s in pending}


def test_prometheus_stops_with_the_stack(tmp_path: Path) -> None:
    with _prometheus(tmp_path / ".stack") as started:
        ctx = started.manager.context
        port = ctx.settings.stack.ports.prometheus
        assert not port_free(ctx.host, port)
        started.manager.down(["prometheus"])
        assert port_free(ctx.host, port)
        assert [s.state for s in started.manager.status() if s.name == "prometheus"] == ["stopped"]
