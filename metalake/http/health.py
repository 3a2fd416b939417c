"""A small, optional HTTP health server for the long-running processes that have no web framework of their own.

``GET /healthz`` says whether the process's loop makes progress (its last poll is at most ``health.stall_after_s``
old): 200 ``{"status": "ok"}``, else 503 ``{"status": "stalled"}``: a supervisor should restart it. ``GET /readyz``
checks every dependency the process needs, each bounded by ``health.check_timeout_s``, concurrently:
``{"status": "ready"|"not-ready", "checks": {"mongo": "ok"|"down: <class>"}}``, 503 when one is down. A failure is
named by its exception class only: a driver's text can hold a URI with its password, a host list or a token.

``GET /metrics`` on the same port is the process's metrics in Prometheus' text format, behind
``telemetry.metrics_token`` (``metalake.telemetry.exposition``: 404 without a token set, 401 without the token).

Off unless the process's port is set (``METALAKE_HEALTH__PORTS__<PROCESS>``; 0 or unset: off); bound to
``health.host`` (loopback by default: a cluster's probes need the pod's address, e.g. ``0.0.0.0``). Stdlib only, in
daemon threads, so it never keeps a stopping process alive and adds no dependency to the processors.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import threading
import time
import urllib.request
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

from pydantic import SecretStr

from metalake.lake_uri import S3Path
from metalake.s3 import S3Client
from metalake.settings import KernelSettings, required
from metalake.telemetry import exposition
from metalake.telemetry.metrics import readiness

log = logging.getLogger(__name__)

#: Raises when the dependency is unreachable or unusable; returns when it is fine.
Check = Callable[[], None]
#: None while the process is alive, else a short reason (no secrets) why it is not.
Liveness = Callable[[], str | None]

_C = TypeVar("_C")

Process = Literal["enrichment", "propagation", "outbound", "access", "lake_worker"]


class Heartbeat:
    """When a loop last made progress (monotonic). Beaten by the loop, read by the health server's thread."""

    def __init__(self) -> None:
        self._last = time.monotonic()

    def beat(self) -> None:
        # A float store is atomic under the GIL: no lock on the consumer's hot path.
        self._last = time.monotonic()

    def age_s(self) -> float:
        return time.monotonic() - self._last


#: The process's poll loop: every ``BatchConsumer`` poll beats it (one consumer loop per processor process), the lake
#: worker's poll too.
LOOP = Heartbeat()


def stalled_after(heartbeat: Heartbeat, max_age_s: float) -> Liveness:
    def liveness() -> str | None:
        age = heartbeat.age_s()
        return None if age <= max_age_s else f"no progress for {age:.0f} s"

    return liveness


class NotReady(Exception):
    """A dependency answered but is not usable yet (e.g. Trino still starting, no broker in Kafka's metadata)."""


def run_checks(checks: Mapping[str, Check], timeout_s: float) -> dict[str, str]:
    """Each check in its own daemon thread, all bounded by one deadline: ``"ok"`` or ``"down: <exception class>"``
    (``"down: Timeout"`` for one still running at the deadline; its thread ends on its own client timeout)."""
    results: dict[str, str] = {}
    lock = threading.Lock()

    def probe(name: str, check: Check) -> None:
        try:
            check()
            outcome = "ok"
        except Exception as exc:  # noqa: BLE001 - any failure is "down"; only its class is reported
            outcome = f"down: {type(exc).__name__}"
        with lock:
            results[name] = outcome

    threads = [
        threading.Thread(target=probe, args=(name, check), name=f"health-{name}", daemon=True)
        for name, check in checks.items()
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout_s
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    with lock:
        return {name: results.get(name, "down: Timeout") for name in checks}


# -- the checks of the usual dependencies ----------------------------------------------------------------------------


class _Once(Generic[_C]):
    """A client opened at the first probe (not when the process starts: no connection unless someone asks), then
    kept: a probe every few seconds must not open a connection pool each time."""

    def __init__(self, open_client: Callable[[], _C]) -> None:
        self._open, self._lock = open_client, threading.Lock()
        self._client: _C | None = None

    def get(self) -> _C:
        with self._lock:
            if self._client is None:
                self._client = self._open()
            return self._client


def mongo_check(settings: KernelSettings, timeout_s: float) -> Check:
    """A ``ping`` on a client of its own (the process's client may be busy or mid-failover)."""
    from pymongo import MongoClient

    timeout_ms = int(timeout_s * 1000)
    client: _Once[MongoClient[dict[str, Any]]] = _Once(
        lambda: MongoClient(
            settings.mongo_uri,
            serverSelectionTimeoutMS=timeout_ms,
            connectTimeoutMS=timeout_ms,
            socketTimeoutMS=timeout_ms,
        )
    )

    def check() -> None:
        client.get().admin.command("ping")

    return check


def kafka_check(settings: KernelSettings, timeout_s: float) -> Check:
    """A metadata request with the processes' own client configuration (so its security settings too): a refused
    password or untrusted certificate is down as ``KafkaAuthenticationFailed`` / ``KafkaTlsFailed``."""
    from metalake.kafka.connection import ConnectionCheck

    connection = ConnectionCheck(settings)

    def check() -> None:
        connection(timeout_s)

    return check


def trino_check(settings: KernelSettings, timeout_s: float) -> Check:
    """Trino's ``/v1/info`` (it needs no credentials): up and no longer starting; over HTTPS, Trino's certificate is
    verified as every Trino client verifies it (``trino.ca_file``, else the system's trust store)."""
    t = settings.trino
    # An unset address is named now (only the operator tooling's settings default to the stack's), not probed later.
    url = f"{t.http_scheme}://{required(t.host, 'trino.host')}:{required(t.port, 'trino.port')}/v1/info"
    ca = settings.trino.ca_file
    context = ssl.create_default_context(cafile=str(ca) if ca else None) if settings.trino.https else None

    def check() -> None:
        # An http(s) URL from settings, never a caller's.
        with urllib.request.urlopen(url, timeout=timeout_s, context=context) as resp:  # noqa: S310
            info = json.load(resp)
        if info.get("starting", True):
            raise NotReady("Trino is starting")

    return check


def directory_check(path: Callable[[], Path]) -> Check:
    """The folder exists (the lake or checkpoint root: a mount that went away fails here, not mid-batch)."""

    def check() -> None:
        if not path().is_dir():
            raise FileNotFoundError("not a directory")

    return check


def lake_check(settings: KernelSettings, timeout_s: float) -> Check:
    """The lake's folder exists, or its S3 bucket answers to the lake's credentials (a signed HEAD request)."""

    def check() -> None:
        root = settings.lake_root
        if isinstance(root, S3Path):
            S3Client.from_settings(settings.lake.s3, timeout_s).head_bucket(root.bucket)
        elif not root.is_dir():
            raise FileNotFoundError("not a directory")

    return check


# -- the server ------------------------------------------------------------------------------------------------------


class HealthServer:
    """``/healthz``, ``/readyz`` and ``/metrics`` on ``host:port`` (port 0: any free one, for tests), served by
    daemon threads."""

    def __init__(
        self,
        host: str,
        port: int,
        liveness: Liveness,
        checks: Mapping[str, Check],
        check_timeout_s: float,
        metrics_token: SecretStr | None = None,
    ) -> None:
        self.liveness, self.checks, self.check_timeout_s = liveness, dict(checks), check_timeout_s
        self.metrics_token = metrics_token
        self._unwatch: Callable[[], None] = lambda: None
        self._server = (_Server6 if ":" in host else ThreadingHTTPServer)((host, port), _handler(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="health-server", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    def start(self) -> HealthServer:
        # metalake_ready: the same checks as /readyz, run when the metrics are scraped.
        self._unwatch = readiness(lambda: self.readiness()[0] == 200)
        self._thread.start()
        return self

    def close(self) -> None:
        self._unwatch()
        self._server.shutdown()
        self._server.server_close()

    def health(self) -> tuple[int, dict[str, Any]]:
        reason = self.liveness()
        if reason is None:
            return 200, {"status": "ok"}
        return 503, {"status": "stalled", "detail": reason}

    def readiness(self) -> tuple[int, dict[str, Any]]:
        checks = run_checks(self.checks, self.check_timeout_s)
        ready = all(state == "ok" for state in checks.values())
        return (200 if ready else 503), {"status": "ready" if ready else "not-ready", "checks": checks}


class _Server6(ThreadingHTTPServer):
    # An IPv6 bind address (``::`` on a dual-stack pod): http.server binds IPv4 only by default.
    address_family = socket.AF_INET6


def _handler(server: HealthServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            if path == "/metrics":
                self._metrics()
                return
            if path == "/healthz":
                status, body = server.health()
            elif path == "/readyz":
                status, body = server.readiness()
            else:
                status, body = 404, {"status": "not-found"}
            payload = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Cache-Control", "no-store")
            self.end_headers()
            self.wfile.write(payload)

        def _metrics(self) -> None:
            answer = exposition.answer(server.metrics_token, self.headers.get("Authorization"))
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            self.send_header("Cache-Control", "no-store")
            for name, value in answer.headers:
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: ANN401
            # A probe every few seconds: not worth a line each at INFO.
            log.debug("health.request", extra={"request": format % args})

    return Handler


def serve_health(
    settings: KernelSettings,
    process: Process,
    checks: Mapping[str, Check],
    liveness: Liveness | None = None,
    port: int | None = None,
) -> HealthServer | None:
    """Start ``process``'s health server if its port is set (``port``, else ``health.ports.<process>``), else return
    None.

    ``liveness`` defaults to the process's poll loop (``LOOP``) beating within ``health.stall_after_s``. A port that
    cannot be bound stops the process: a probe that finds nothing would restart it in a loop anyway."""
    cfg = settings.health
    port = port or getattr(cfg.ports, process)
    if not port:
        return None
    server = HealthServer(
        cfg.host,
        port,
        liveness or stalled_after(LOOP, cfg.stall_after_s),
        checks,
        cfg.check_timeout_s,
        settings.telemetry.metrics_token,
    ).start()
    log.info("health.serving", extra={"service": process, "host": cfg.host, "port": server.port})
    return server


def standard_checks(settings: KernelSettings, *names: Literal["mongo", "kafka", "trino", "lake"]) -> dict[str, Check]:
    """The checks named, built from ``settings`` (each with ``health.check_timeout_s``)."""
    timeout = settings.health.check_timeout_s
    # The clients give up a little before the deadline, so a down dependency is named by its own error class
    # (ServerSelectionTimeoutError, KafkaException), not by the deadline's "Timeout".
    client_timeout = timeout / 2
    builders: dict[str, Callable[[], Check]] = {
        "mongo": lambda: mongo_check(settings, client_timeout),
        "kafka": lambda: kafka_check(settings, client_timeout),
        "trino": lambda: trino_check(settings, client_timeout),
        "lake": lambda: lake_check(settings, client_timeout),
    }
    return {name: builders[name]() for name in names}
