"""Starting and stopping one background service: pid files that survive pid reuse, process groups, timeouts."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class PidRecord:
    pid: int
    start_ticks: int  # /proc/<pid>/stat field 22: tells a recycled pid from ours.

    @classmethod
    def read(cls, path: Path) -> PidRecord | None:
        try:
            pid, ticks = path.read_text().split()
            return cls(int(pid), int(ticks))
        except (OSError, ValueError):
            return None

    def write(self, path: Path) -> None:
        path.write_text(f"{self.pid} {self.start_ticks}\n")


def _start_ticks(pid: int) -> int | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name (field 2) may hold spaces and parentheses: split after its closing parenthesis.
    fields = stat[stat.rindex(")") + 2 :].split()
    return int(fields[19])


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True
    return stat[stat.rindex(")") + 2 :].split()[0] == "Z"


def alive(record: PidRecord) -> bool:
    return _start_ticks(record.pid) == record.start_ticks and not _is_zombie(record.pid)


def spawn(
    argv: Sequence[str], *, log_file: Path, pid_file: Path, cwd: Path, env: Mapping[str, str]
) -> tuple[PidRecord, subprocess.Popen[bytes]]:
    """Start ``argv`` in its own session (so ``stop`` can signal the whole group), output appended to ``log_file``.

    Keep the returned Popen while waiting for the service: Python reaps children whose Popen was dropped, and the
    exit code would be lost.
    """
    log_file.parent.mkdir(parents=True, exist_ok=True)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    with log_file.open("ab") as log:
        log.write(f"\n=== {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {argv[0]}\n".encode())
        log.flush()
        # argv is built by the stack, not from user input.
        proc = subprocess.Popen(
            list(argv),
            cwd=cwd,
            env=dict(env),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    ticks = _start_ticks(proc.pid)
    record = PidRecord(proc.pid, ticks if ticks is not None else -1)
    record.write(pid_file)
    return record, proc


def exit_code(record: PidRecord, proc: subprocess.Popen[bytes] | None = None) -> int | None:
    """The exit code if the service has exited (-1 when it was not started by this process), None while running."""
    if proc is not None:
        return proc.poll()
    try:
        pid, status = os.waitpid(record.pid, os.WNOHANG)
    except ChildProcessError:
        return None if alive(record) else -1
    if pid == 0:
        return None
    return os.waitstatus_to_exitcode(status)


def stop(record: PidRecord, timeout_s: float) -> bool:
    """SIGTERM the service's process group, SIGKILL after ``timeout_s``. True if it was running."""
    if not alive(record):
        return False
    try:
        pgid = os.getpgid(record.pid)
    except ProcessLookupError:
        return False
    os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        exit_code(record)
        if not alive(record):
            return True
        time.sleep(0.2)
    os.killpg(pgid, signal.SIGKILL)
    time.sleep(0.2)
    exit_code(record)
    return True


def tail(path: Path, lines: int) -> str:
    try:
        with path.open("rb") as f:
            f.seek(0, os.SEEK_END)
            size = f.tell()
            f.seek(max(0, size - 64 * 1024))
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
