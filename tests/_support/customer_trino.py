"""A "customer's Trino" for the enforcement tests and bench: a second Trino server from the stack's cached
distribution, on its own port, loading only the ``opa`` and ``postgresql`` plugins deploy/local/fetch/trino.sh
keeps beside the server (``cache/trino/extra-plugins``), with a PostgreSQL catalog and OPA access control pointed at
an admin API. Plain HTTP on loopback: users are named by the ``X-Trino-User`` header, as a customer's gateway would
after authenticating them."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import Any

import httpx
import trino
import uvicorn

from metalake.java import find_java
from ops.settings import Settings
from tests._support.itest import wait_for

_JVM = [
    "-server",
    "-Xmx1G",
    "-XX:+UseG1GC",
    "-XX:+ExitOnOutOfMemoryError",
    "-XX:ReservedCodeCacheSize=128M",
    "-XX:+EnableDynamicAgentLoading",
    "-Djdk.attach.allowAttachSelf=true",
    "-Dfile.encoding=UTF-8",
]


class CustomerTrino:
    """``start()`` writes its etc/ under ``workdir`` and starts it; ``stop()`` ends that process (and only it)."""

    def __init__(
        self,
        settings: Settings,
        workdir: Path,
        *,
        port: int,
        database: str,
        access_control: str | None,
        files: dict[str, str] | None = None,
        plugins: Path | None = None,
        catalogs: dict[str, str] | None = None,
        probe_user: str = "probe",
    ) -> None:
        self.settings, self.workdir, self.port = settings, workdir, port
        self.database, self.access_control = database, access_control
        # A registration's `trino_files` (installed as handed out, `etc/` made absolute), instead of one OPA file.
        self.files = files
        self.proc: subprocess.Popen[bytes] | None = None
        self.log = workdir / "trino.log"
        # Another plugin folder and catalogs (name -> properties) than the PostgreSQL warehouse's: the lake's.
        self.plugins = plugins or settings.local_stack_dir / "cache" / "trino" / "extra-plugins"
        self.catalogs = catalogs
        self.catalog = "warehouse" if catalogs is None else next(iter(catalogs))
        self.probe_user = probe_user  # a user its access control lets run ``SELECT 1``

    def _write_etc(self) -> Path:
        etc = self.workdir / "etc"
        (etc / "catalog").mkdir(parents=True, exist_ok=True)
        lines = [
            "coordinator=true",
            "node-scheduler.include-coordinator=true",
            f"http-server.http.port={self.port}",
            f"discovery.uri=http://127.0.0.1:{self.port}",
            "query.max-memory=256MB",
            "query.max-memory-per-node=256MB",
            "task.concurrency=2",
            f"plugin.dir={self.plugins}",
            f"catalog.config-dir={etc / 'catalog'}",
        ]
        if self.files is not None:
            for name, text in self.files.items():
                text = text.replace("etc/", f"{etc}/")
                if name == "config.properties":
                    lines.append(text.strip())
                else:
                    (etc / name).write_text(text)
        elif self.access_control is not None:
            (etc / "access-control.properties").write_text(self.access_control)
            lines.append(f"access-control.config-files={etc / 'access-control.properties'}")
        (etc / "config.properties").write_text("\n".join(lines) + "\n")
        (etc / "log.properties").write_text("io.trino=WARN\n")
        if self.catalogs is not None:
            for name, text in self.catalogs.items():
                (etc / "catalog" / f"{name}.properties").write_text(text)
            return etc
        pg = self.settings.stack.ports.postgres
        (etc / "catalog" / "warehouse.properties").write_text(
            "connector.name=postgresql\n"
            f"connection-url=jdbc:postgresql://127.0.0.1:{pg}/{self.database}\n"
            "connection-user=metalake\n"
        )
        return etc

    def start(self) -> CustomerTrino:
        wanted = ["opa", "postgresql"] if self.catalogs is None else ["opa"]
        if not all((self.plugins / name).is_dir() for name in wanted):
            raise AssertionError(f"no {'/'.join(wanted)} plugins in {self.plugins}: run deploy/local/fetch/trino.sh")
        etc = self._write_etc()
        server = self.settings.local_stack_dir / "cache" / "trino" / "server"
        java = find_java(24, env_var="METALAKE_TRINO_JAVA_HOME")
        argv = [
            str(java),
            "-cp",
            str(server / "lib" / "*"),
            *_JVM,
            "-Dnode.environment=customer",
            "-Dnode.id=customer-1",
            # Loopback only: the host's own address may not route (the coordinator then waits for itself).
            "-Dnode.internal-address=127.0.0.1",
            f"-Dnode.data-dir={self.workdir / 'data'}",
            f"-Dconfig={etc / 'config.properties'}",
            f"-Dlog.levels-file={etc / 'log.properties'}",
            "io.trino.server.TrinoServer",
        ]
        env = {k: v for k, v in os.environ.items() if k != "JAVA_TOOL_OPTIONS"}
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=self.workdir)
        return self

    def tail(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def wait_ready(self, timeout_s: float = 120) -> None:
        def probe() -> bool:
            if self.proc is not None and self.proc.poll() is not None:
                raise AssertionError(f"the customer Trino exited with {self.proc.returncode}:\n{self.tail()}")
            try:
                info = httpx.get(f"http://127.0.0.1:{self.port}/v1/info", timeout=2).json()
            except (httpx.HTTPError, ValueError):
                return False
            # Started, and its coordinator registered as a worker too (before that: NO_NODES_AVAILABLE).
            return info.get("starting") is False and self.query(self.probe_user, "SELECT 1") == [[1]]

        wait_for("the customer Trino to start", probe, timeout_s=timeout_s, interval_s=0.5)

    def stop(self) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=30)

    def query_as(self, original_user: str, user: str, sql: str) -> list[list[Any]] | str:
        """``query`` with ``X-Trino-Original-User: original_user`` and ``X-Trino-User: user``: what a client sends
        after ``SET SESSION AUTHORIZATION``, an impersonation Trino checks (the client library keeps these headers
        to itself, so this speaks the protocol directly)."""
        headers = {"X-Trino-Original-User": original_user, "X-Trino-User": user, "X-Trino-Catalog": self.catalog}
        with httpx.Client(base_url=f"http://127.0.0.1:{self.port}", headers=headers, timeout=60) as http:
            answer = http.post("/v1/statement", content=sql).json()
            rows: list[list[Any]] = []
            while True:
                if "error" in answer:
                    return str(answer["error"].get("errorName"))
                rows += answer.get("data") or []
                if "nextUri" not in answer:
                    return rows
                answer = http.get(answer["nextUri"]).json()

    def query(self, user: str, sql: str) -> list[list[Any]] | str:
        """The rows, or the error's name (``PERMISSION_DENIED``...) when Trino refuses the query."""
        conn = trino.dbapi.connect(
            host="127.0.0.1", port=self.port, user=user, catalog=self.catalog, http_scheme="http"
        )
        try:
            cur = conn.cursor()
            cur.execute(sql)
            return [list(r) for r in cur.fetchall()]
        except trino.exceptions.TrinoQueryError as exc:
            return str(exc.error_name)
        finally:
            conn.close()


class ApiServer:
    """The admin API app served by uvicorn in a thread on ``port`` (the customer Trino calls it over HTTP)."""

    def __init__(self, app: Any, port: int) -> None:
        self.port = port
        self.server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
        self.thread = threading.Thread(target=self.server.run, name="api-server", daemon=True)

    def start(self) -> ApiServer:
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise AssertionError("the API server did not start")
            time.sleep(0.05)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"
