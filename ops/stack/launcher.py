"""The local stack's launcher of dedicated tenants' streaming queries (``local`` in ``metalake.launchers``).

The query is ``python -m processors.enrichment --tenant T`` as a detached child (its own session, so it outlives the
lake worker that provisioned the tenant and a restart of the worker does not stop ingestion), with its pid and ready
file under ``.stack/run/tenant-jobs/<tenant>/`` and its log in ``.stack/logs/stream-<tenant>.log``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from control.provisioning.launcher import JobLauncher, JobStatus
from control.provisioning.settings import ProvisioningWorkerSettings
from ops.stack.paths import exported_stack_dir
from tenants.naming import validate_tenant_id


def _start_ticks(pid: int) -> int | None:
    """Field 22 of /proc/<pid>/stat: tells our process from a later one that got the same pid."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return None if fields[0] == "Z" else int(fields[19])


class LocalProcessLauncher(JobLauncher):
    """The query as a local child process; state in files, so any lake worker (or a restarted one) can manage it."""

    def __init__(
        self, settings: ProvisioningWorkerSettings, *, stop_timeout_s: float = 60.0, stack_dir: Path | None = None
    ) -> None:
        # The worker's settings have no stack section (a deployment has no local stack): the folder is the one the
        # tooling that started the worker exported to it (``stack_dir``: the tooling itself, which knows it).
        self._stack_dir = stack_dir or exported_stack_dir()
        self._stop_timeout_s = stop_timeout_s

    def tenants(self) -> list[str]:
        """The tenants with a query's files here, running or not (``metalake stack down`` stops them all)."""
        jobs = self._stack_dir / "run" / "tenant-jobs"
        return sorted(p.name for p in jobs.iterdir() if p.is_dir()) if jobs.is_dir() else []

    def run_dir(self, tenant: str) -> Path:
        return self._stack_dir / "run" / "tenant-jobs" / validate_tenant_id(tenant)

    def log_file(self, tenant: str) -> Path:
        return self._stack_dir / "logs" / f"stream-{validate_tenant_id(tenant)}.log"

    def _pid(self, tenant: str) -> int | None:
        try:
            pid, ticks = (self.run_dir(tenant) / "stream.pid").read_text().split()
        except (OSError, ValueError):
            return None
        return int(pid) if _start_ticks(int(pid)) == int(ticks) else None

    def status(self, tenant: str) -> JobStatus:
        pid = self._pid(tenant)
        if pid is None:
            return JobStatus(tenant, "stopped")
        ready = (self.run_dir(tenant) / "stream.ready").exists()
        return JobStatus(tenant, "running" if ready else "starting", pid)

    def ensure_running(self, tenant: str) -> JobStatus:
        current = self.status(tenant)
        if current.state != "stopped":
            return current
        run_dir = self.run_dir(tenant)
        run_dir.mkdir(parents=True, exist_ok=True)
        ready = run_dir / "stream.ready"
        ready.unlink(missing_ok=True)
        log_file = self.log_file(tenant)
        log_file.parent.mkdir(parents=True, exist_ok=True)
        argv = [
            sys.executable,
            "-m",
            "processors.enrichment",
            "--tenant",
            tenant,
            "--ready-file",
            str(ready),
        ]
        with log_file.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env={**os.environ, "PYTHONUNBUFFERED": "1"},
            )
        (run_dir / "stream.pid").write_text(f"{proc.pid} {_start_ticks(proc.pid) or -1}\n")
        return JobStatus(tenant, "starting", proc.pid)

    def stop(self, tenant: str) -> bool:
        """SIGTERM (the job stops its queries cleanly), SIGKILL after the timeout; True if a process was stopped."""
        pid = self._pid(tenant)
        run_dir = self.run_dir(tenant)
        if pid is not None:
            self._signal(pid, signal.SIGTERM)
            deadline = time.monotonic() + self._stop_timeout_s
            while _start_ticks(pid) is not None and time.monotonic() < deadline:
                self._reap(pid)
                time.sleep(0.2)
            if _start_ticks(pid) is not None:
                self._signal(pid, signal.SIGKILL)
            self._reap(pid)
        for name in ("stream.pid", "stream.ready"):
            (run_dir / name).unlink(missing_ok=True)
        if run_dir.is_dir():
            run_dir.rmdir()
        return pid is not None

    @staticmethod
    def _signal(pid: int, signum: int) -> None:
        try:
            os.killpg(pid, signum)  # the job's session: Spark's JVM goes too
        except ProcessLookupError:
            return

    @staticmethod
    def _reap(pid: int) -> None:
        # A child of this process stays a zombie until waited for; any other process is reaped by its parent.
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
