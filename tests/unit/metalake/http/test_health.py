"""The processors' health server: liveness from the loop's heartbeat, readiness per dependency, nothing secret."""

from __future__ import annotations

import json
import logging
import socket
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from metalake.http import health
from metalake.http.health import (
    LOOP,
    HealthServer,
    Heartbeat,
    directory_check,
    run_checks,
    serve_health,
    stalled_after,
    standard_checks,
)
from metalake.kafka import BatchConsumer
from ops.settings import Settings


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _get(url: str) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(url, timeout=5) as resp:  # noqa: S310 - loopback test server
            return resp.status, json.load(resp)
    except urllib.error.HTTPError as exc:
        return exc.code, json.load(exc)


def _ok() -> None:
    pass


def _leaky() -> None:
    raise ConnectionError("mongodb://admin:hunter2@db.internal:27017 refused")


def _slow() -> None:
    time.sleep(3)


def test_checks_say_ok_or_the_exception_class_only() -> None:
    assert run_checks({"mongo": _ok, "kafka": _leaky}, timeout_s=1) == {"mongo": "ok", "kafka": "down: ConnectionError"}


def test_a_check_past_the_deadline_is_down_without_waiting_for_it() -> None:
    started = time.monotonic()
    assert run_checks({"trino": _slow, "mongo": _ok}, timeout_s=0.2) == {"trino": "down: Timeout", "mongo": "ok"}
    assert time.monotonic() - started < 1.5


def test_heartbeat_liveness() -> None:
    beat = Heartbeat()
    assert stalled_after(beat, 60)() is None
    beat._last -= 120
    reason = stalled_after(beat, 60)()
    assert reason is not None and reason.startswith("no progress for")
    beat.beat()
    assert stalled_after(beat, 60)() is None


@pytest.fixture
def server() -> Iterator[HealthServer]:
    srv = HealthServer("127.0.0.1", 0, lambda: None, {"mongo": _ok, "kafka": _ok}, check_timeout_s=1).start()
    yield srv
    srv.close()


def test_served_over_http(server: HealthServer) -> None:
    base = f"http://127.0.0.1:{server.port}"
    assert _get(f"{base}/healthz") == (200, {"status": "ok"})
    assert _get(f"{base}/readyz") == (200, {"status": "ready", "checks": {"mongo": "ok", "kafka": "ok"}})
    assert _get(f"{base}/readyz?verbose=1")[0] == 200
    assert _get(f"{base}/metrics") == (404, {"status": "not-found"})


def test_binds_an_ipv6_address() -> None:
    # No skip: the project's machines (and CI's) have ::1; a machine without it fails here, loudly, as the rule for
    # tests that need something is.
    srv = HealthServer("::1", 0, lambda: None, {}, check_timeout_s=1).start()
    try:
        assert _get(f"http://[::1]:{srv.port}/healthz") == (200, {"status": "ok"})
    finally:
        srv.close()


def test_not_ready_is_503_naming_the_dependency_and_no_driver_text(server: HealthServer) -> None:
    server.checks["kafka"] = _leaky
    status, body = _get(f"http://127.0.0.1:{server.port}/readyz")
    assert status == 503
    assert body == {"status": "not-ready", "checks": {"mongo": "ok", "kafka": "down: ConnectionError"}}
    assert "hunter2" not in json.dumps(body)


def test_stalled_is_503(server: HealthServer) -> None:
    server.liveness = lambda: "no progress for 400 s"
    assert _get(f"http://127.0.0.1:{server.port}/healthz") == (
        503,
        {"status": "stalled", "detail": "no progress for 400 s"},
    )


def test_off_unless_the_process_port_is_set(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="metalake.http.health")
    assert serve_health(Settings(), "propagation", {"mongo": _ok}) is None
    monkeypatch.setenv("METALAKE_HEALTH__PORTS__PROPAGATION", "0")
    assert serve_health(Settings(), "propagation", {"mongo": _ok}) is None
    port = _closed_port()
    monkeypatch.setenv("METALAKE_HEALTH__PORTS__PROPAGATION", str(port))
    # Another process's port does not start this one's server.
    assert serve_health(Settings(), "outbound", {"mongo": _ok}) is None
    srv = serve_health(Settings(), "propagation", {"mongo": _ok})
    assert srv is not None
    assert [(r.message, r.__dict__["port"]) for r in caplog.records] == [("health.serving", port)]
    try:
        LOOP.beat()
        assert _get(f"http://127.0.0.1:{port}/healthz") == (200, {"status": "ok"})
        assert _get(f"http://127.0.0.1:{port}/readyz") == (200, {"status": "ready", "checks": {"mongo": "ok"}})
    finally:
        srv.close()


def test_liveness_follows_the_stall_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_HEALTH__PORTS__ACCESS", str(_closed_port()))
    monkeypatch.setenv("METALAKE_HEALTH__STALL_AFTER_S", "30")
    monkeypatch.setattr(health, "LOOP", Heartbeat())
    srv = serve_health(Settings(), "access", {})
    assert srv is not None
    try:
        assert srv.health() == (200, {"status": "ok"})
        health.LOOP._last -= 31
        assert srv.health()[0] == 503
    finally:
        srv.close()


def test_health_settings_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_HEALTH__PORTS__ACCESS", "70000")
    with pytest.raises(ValueError, match="access"):
        Settings()


def test_a_batch_consumer_poll_beats_the_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METALAKE_KAFKA__BOOTSTRAP_SERVERS", f"127.0.0.1:{_closed_port()}")
    consumer = BatchConsumer(Settings(), "health-unit", ["nothing"], log_level=0)
    try:
        LOOP._last -= 1000
        assert consumer.poll_batch(timeout_s=0.1) == []
        assert LOOP.age_s() < 5
    finally:
        consumer.close()


def test_kafka_and_mongo_checks_fail_on_a_closed_port_with_their_own_error(monkeypatch: pytest.MonkeyPatch) -> None:
    port = _closed_port()
    monkeypatch.setenv("METALAKE_KAFKA__BOOTSTRAP_SERVERS", f"127.0.0.1:{port}")
    monkeypatch.setenv("METALAKE_MONGO__URI", f"mongodb://user:hunter2@127.0.0.1:{port}/")
    monkeypatch.setenv("METALAKE_HEALTH__CHECK_TIMEOUT_S", "1")
    settings = Settings()
    # The clients give up at half the check bound (0.5 s), so their own errors name what failed, not "Timeout"; a
    # generous deadline here keeps a loaded machine from turning that into a race.
    checks = standard_checks(settings, "kafka", "mongo")
    started = time.monotonic()
    assert run_checks(checks, timeout_s=10) == {
        "kafka": "down: KafkaException",
        "mongo": "down: ServerSelectionTimeoutError",
    }
    assert time.monotonic() - started < 5


def test_directory_check(tmp_path: Path) -> None:
    run = lambda path: run_checks({"lake": directory_check(lambda: path)}, timeout_s=1)["lake"]  # noqa: E731
    assert run(tmp_path) == "ok"
    assert run(tmp_path / "gone") == "down: FileNotFoundError"
